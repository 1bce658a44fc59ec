"""The driver's metastore client, from [hive] and from the [spark] keys a cluster already sets for
Hive's own client: which client reads the metastore ([hive] metastore_client), and how long one of
its calls may wait (Hive's hive.metastore.client.socket.timeout, in [spark] as Spark takes it)."""
from __future__ import annotations

import re
from typing import Mapping

from etl.config.model import METASTORE_SASL, MetastoreClient
from etl.config.section import Section
from etl.errors import ConfigError

METASTORE_SOCKET_TIMEOUT = "spark.hadoop.hive.metastore.client.socket.timeout"
# Hive's default is 600 s; a metastore's listing of thousands of partitions takes seconds, and a
# stopped one should fail a scheduled run well before its next start.
DEFAULT_TIMEOUT_SECONDS = 60.0
# Hive's time units (HiveConf.unitFor); a bare number is in seconds, this setting's default unit.
_UNIT_SECONDS = {"": 1.0, "ns": 1e-9, "nsec": 1e-9, "us": 1e-6, "usec": 1e-6, "ms": 1e-3, "msec": 1e-3,
                 "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
                 "m": 60.0, "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
                 "h": 3600.0, "hour": 3600.0, "hours": 3600.0, "d": 86400.0, "day": 86400.0, "days": 86400.0}
_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$")


def metastore_client(s: Section, metastore: str, spark: Mapping[str, str]) -> MetastoreClient:
    """THRIFT for a thrift:// metastore unless SASL is on ([spark] spark.hadoop.hive.metastore.
    sasl.enabled: the driver's Thrift client speaks no SASL), else SPARK; a choice the two rule
    out exits 2."""
    sasl = spark.get(METASTORE_SASL, "false").strip().lower() == "true"
    derived = MetastoreClient.SPARK if sasl or metastore == "embedded" else MetastoreClient.THRIFT
    chosen = s.choice("metastore_client", derived)
    if chosen is MetastoreClient.THRIFT and (sasl or metastore == "embedded"):
        why = f"[spark] {METASTORE_SASL} = true (it speaks no SASL)" if sasl else "metastore = embedded (no server)"
        raise s.fail("metastore_client", f"thrift cannot be used with {why}; use spark")
    return chosen


def metastore_timeout_seconds(spark: Mapping[str, str]) -> float:
    """[spark] spark.hadoop.hive.metastore.client.socket.timeout in seconds (Hive's units), or
    DEFAULT_TIMEOUT_SECONDS; anything but a positive duration exits 2 naming the key."""
    raw = spark.get(METASTORE_SOCKET_TIMEOUT)
    if raw is None:
        return DEFAULT_TIMEOUT_SECONDS
    match = _DURATION_RE.match(raw.lower())
    if match is None or match.group(2) not in _UNIT_SECONDS or float(match.group(1)) <= 0:
        raise ConfigError(f"[spark] {METASTORE_SOCKET_TIMEOUT}: {raw!r} is not a positive duration "
                          f"(a number with one of Hive's units: 1500ms, 10s, 2m, 1h; seconds when none)")
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
