"""Decoders turn a chunk of raw Kafka message values into Arrow rows of a table's data columns.

  base.py        Decoded, the Decoder contract, vectorised helpers they share
  json.py        the json decoder (json_lines.py: reading blocks; json_values.py: conversions)
  access_log.py  the access_log decoder
  avro.py        the avro decoder (avro_types.py: Avro types against columns)
  protobuf.py    the protobuf decoder (protobuf_types.py: fields against columns)
  framing.py     the Schema Registry framing, read a chunk at a time, shared by both
  writer_schemas.py  writer schemas from the Schema Registry, by id, once per process
  registry.py    DecoderKind -> decoder class, and make_decoder
"""
from etl.rows.decoders.access_log import ACCESS_LOG_COLUMNS, ACCESS_LOG_FORMAT, AccessLogDecoder
from etl.rows.decoders.base import (
    EMPTY_MESSAGE, Decoded, Decoder, arange, failing_positions, invalid_utf8_positions, mask_without,
)
from etl.rows.decoders.json import JsonDecoder
from etl.rows.decoders.registry import DECODERS, make_decoder

__all__ = [
    "ACCESS_LOG_COLUMNS", "ACCESS_LOG_FORMAT", "DECODERS", "EMPTY_MESSAGE", "AccessLogDecoder", "Decoded", "Decoder",
    "JsonDecoder", "arange", "failing_positions", "invalid_utf8_positions", "make_decoder", "mask_without",
]
