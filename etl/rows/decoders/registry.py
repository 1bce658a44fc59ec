"""Which class decodes each [job] decoder: the one list of decoders besides etl.config.DecoderKind.

Adding a decoder is a member in DecoderKind, a module in this package, and a line here.
"""
from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

from etl.config import DecoderKind
from etl.errors import ConfigError
from etl.model.schema import TableSchema
from etl.rows.decoders.access_log import AccessLogDecoder
from etl.rows.decoders.avro import AvroDecoder
from etl.rows.decoders.base import Decoder
from etl.rows.decoders.json import JsonDecoder
from etl.rows.decoders.protobuf import ProtobufDecoder
from etl.rows.decoders.writer_schemas import WriterSchemas

DECODERS: Mapping[DecoderKind, type[Decoder]] = MappingProxyType({
    DecoderKind.JSON: JsonDecoder,
    DecoderKind.ACCESS_LOG: AccessLogDecoder,
    DecoderKind.AVRO: AvroDecoder,
    DecoderKind.PROTOBUF: ProtobufDecoder,
})


def make_decoder(kind: DecoderKind | str, schema: TableSchema, zone: str = "UTC",
                 writer_schemas: WriterSchemas | None = None, avro_schema: str | None = None) -> Decoder:
    """The decoder for `kind` (a member, or its name as written in the INI) over `schema`; a
    timestamp written without a zone is wall-clock time in `zone` ([hive] partition_timezone).
    Avro and Protobuf read their writer schemas from `writer_schemas` (or, plain Avro, from the
    fixed `avro_schema` text)."""
    if kind not in DECODERS:  # members hash and compare as their strings
        raise ConfigError(f"unknown decoder {kind!r}; set [job] decoder to one of {', '.join(DECODERS)}")
    if kind == DecoderKind.AVRO:
        return AvroDecoder(schema, zone, writer_schemas=None if avro_schema else writer_schemas,
                           fixed_schema=avro_schema)
    if kind == DecoderKind.PROTOBUF:
        return ProtobufDecoder(schema, zone, writer_schemas)
    return DECODERS[kind](schema, zone)
