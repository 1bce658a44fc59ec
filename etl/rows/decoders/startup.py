"""The start-up check of an avro or protobuf job: each column against the field it reads in the
writer schema producers use now (the latest version of each topic's value subject, or the
fixed avro_schema), so that a column that cannot hold its field stops the job before it
touches anything, naming both. Later schema versions are checked as their ids first appear:
their records are rejected with the same reason, never dropped."""
from __future__ import annotations

import logging

from etl.errors import ConfigError
from etl.rows.decoders.avro import AvroDecoder
from etl.rows.decoders.base import Decoder, Unsupported
from etl.rows.decoders.protobuf import SERIALIZED, ProtobufDecoder
from etl.rows.decoders.writer_schemas import AVRO, WriterSchema

log = logging.getLogger(__name__)


def value_subject(topic: str) -> str:
    """The subject a producer's serializer registers a topic's value schema under (Confluent's
    default TopicNameStrategy)."""
    return f"{topic}-value"


def check_writer_schemas(decoder: Decoder, topics: tuple[str, ...], where: str) -> None:
    """Raises ConfigError (`where` names the DDL) when a column cannot hold its field."""
    try:
        for name, writer in current_writer_schemas(decoder, topics):
            decoder.check(writer, name)
    except Unsupported as exc:
        raise ConfigError(f"{where}: {exc}") from exc


def current_writer_schemas(decoder: Decoder, topics: tuple[str, ...]) -> list[tuple[str, WriterSchema]]:
    """(what it is, schema) of the writer schemas producers use now: the fixed avro_schema, or
    the latest of each topic's value subject (a topic without one yet is skipped)."""
    if isinstance(decoder, AvroDecoder) and decoder.fixed_schema is not None:
        return [("avro_schema", WriterSchema(None, AVRO, decoder.fixed_schema))]
    if not isinstance(decoder, (AvroDecoder, ProtobufDecoder)):
        return []
    fmt = SERIALIZED if isinstance(decoder, ProtobufDecoder) else None
    found = []
    for topic in topics:
        latest = decoder.writer_schemas.version(value_subject(topic), "latest", fmt=fmt)
        if latest is None:
            log.info("the Schema Registry has no subject %s yet; its schemas are checked as they appear",
                     value_subject(topic))
        else:
            found.append((f"subject {value_subject(topic)} (schema id {latest.schema_id})", latest))
    return found
