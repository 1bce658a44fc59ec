"""The decoder registry against the config's DecoderKind: every kind the INI accepts has a
decoder, and the registry names no decoder the INI cannot choose."""
from __future__ import annotations

from pathlib import Path

import pytest

from etl.config import DecoderKind, RetryConfig, SchemaRegistryConfig
from etl.errors import ConfigError
from etl.model.schema import load_table_schema
from etl.rows.decoders import DECODERS, Decoder, make_decoder
from etl.rows.decoders.writer_schemas import WriterSchemas

SCHEMAS = Path(__file__).resolve().parents[2] / "warehouse_schema"
SCHEMA_OF = {DecoderKind.JSON: "events.sql", DecoderKind.ACCESS_LOG: "access_log.sql", DecoderKind.AVRO: "events.sql",
             DecoderKind.PROTOBUF: "events.sql"}
# Building a decoder asks no registry: an address nothing listens on will do.
WRITER_SCHEMAS = WriterSchemas(SchemaRegistryConfig({"url": "http://127.0.0.1:9"}), RetryConfig())


def test_every_decoder_kind_has_a_decoder_and_no_other_decoder_is_registered():
    assert set(DECODERS) == set(DecoderKind)
    assert all(issubclass(decoder, Decoder) for decoder in DECODERS.values())


@pytest.mark.parametrize("kind", list(DecoderKind))
def test_make_decoder_takes_the_member_or_its_name_as_written_in_the_ini(kind):
    schema = load_table_schema(SCHEMAS / SCHEMA_OF[kind])
    assert type(make_decoder(kind, schema, writer_schemas=WRITER_SCHEMAS)) is DECODERS[kind]
    assert type(make_decoder(kind.value, schema, writer_schemas=WRITER_SCHEMAS)) is DECODERS[kind]


def test_the_unknown_decoder_message_lists_the_kinds_in_their_order():
    with pytest.raises(ConfigError, match=f"one of {', '.join(kind.value for kind in DecoderKind)}$"):
        make_decoder("xml", load_table_schema(SCHEMAS / "events.sql"))
