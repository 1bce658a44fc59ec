"""A metastore that does not answer while `etl verify` lists a table's partitions is the ETL's
error (exit 75, worth a retry), as it is for every other metastore call, not a traceback; found
by a run of the crash tests, where verify met a metastore whose connection had gone stale."""
from __future__ import annotations

import socket

import pytest

from etl.config.model import HiveConfig
from etl.errors import HiveError, HiveUnavailable
from etl.hive.catalog import SparkCatalog
from etl.hive.registrar import registered_partitions
from etl.hive.thrift_catalog import ThriftCatalog


class _Catalog:
    def __init__(self, error: str):
        self.error = error

    def tableExists(self, name):  # noqa: N802 - Spark's name
        raise RuntimeError(self.error)


class _Spark:
    def __init__(self, error: str):
        self.catalog = _Catalog(error)


HIVE = HiveConfig("thrift://metastore:9083", "db", "t", None, "t_rejected")


def test_a_metastore_that_does_not_answer_is_retryable_and_named():
    error = "org.apache.thrift.transport.TTransportException: java.net.SocketException: Broken pipe"
    with pytest.raises(HiveUnavailable,
                       match=r"cannot list the partitions of db.t \(metastore thrift://metastore:9083\)"):
        registered_partitions(SparkCatalog(lambda: _Spark(error)), HIVE, "t")


def test_another_metastore_failure_is_a_hive_error():
    with pytest.raises(HiveError, match="no such thing") as raised:
        registered_partitions(SparkCatalog(lambda: _Spark("no such thing")), HIVE, "t")
    assert not isinstance(raised.value, HiveUnavailable)


def test_a_thrift_metastore_that_refuses_the_connection_is_retryable_and_named():
    with socket.socket() as held:  # a port nobody listens on: bound, never listening
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        with pytest.raises(HiveUnavailable, match=rf"cannot list the partitions of db.t .*cannot connect to the "
                                                  rf"metastore at thrift://127.0.0.1:{port}"):
            registered_partitions(ThriftCatalog(f"thrift://127.0.0.1:{port}", 10), HIVE, "t")
