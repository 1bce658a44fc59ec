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
from etl.rows.decoders.base import Decoder
from etl.rows.decoders.json import JsonDecoder

DECODERS: Mapping[DecoderKind, type[Decoder]] = MappingProxyType({
    DecoderKind.JSON: JsonDecoder,
    DecoderKind.ACCESS_LOG: AccessLogDecoder,
})


def make_decoder(kind: DecoderKind | str, schema: TableSchema, zone: str = "UTC") -> Decoder:
    """The decoder for `kind` (a member, or its name as written in the INI) over `schema`; a
    timestamp written without a zone is wall-clock time in `zone` ([hive] partition_timezone)."""
    if kind not in DECODERS:  # members hash and compare as their strings
        raise ConfigError(f"unknown decoder {kind!r}; set [job] decoder to one of {', '.join(DECODERS)}")
    return DECODERS[kind](schema, zone)
