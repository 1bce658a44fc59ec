"""The Hive metastores of the clusters this is for: Hive 3.1.3 and 4.0.1, each the standalone
metastore of Apache's release, on PostgreSQL (Debian's), its schema made by Hive's schema tool
(tests/harness/hive_metastores.py). One PostgreSQL for the module, one metastore per test,
started only when these tests run.

The job reaches each as a cluster's job would: its driver's Thrift client for the tables'
facts and the partitions it adds (get_table_req, which Hive 2.3 to 4.0 all serve), and Spark's
Hive client for its DDL: the built-in 2.3 client for 3.1, and for 4.0, whose Thrift API no
longer has the 2.3 client's `get_table`, Hive's 4.0.1 client through
`spark.sql.hive.metastore.version` and `.jars` (docs/cluster.md). Each test: a first batch
SIGKILLed while a task writes; `etl recover`, and the run of what came since; the exactly-once oracle with
`etl verify --deep`; and the analysts' read, through a Spark Thrift Server on that metastore.
"""
from __future__ import annotations

import subprocess

import pytest

from tests.harness.data import events_by_partition
from tests.harness.hive_metastores import HIVE_3_1, HIVE_4_0, PrivatePostgres, PrivateThriftServer, StandaloneMetastore
from tests.harness.jdbc import offsets_reader
from tests.harness.oracle import check_exactly_once, expected_offsets
from tests.harness.recovery import kill_mid_write, recover_or_run

pytestmark = [pytest.mark.slow, pytest.mark.cell("hive-3.1", "hive-4.0")]

FIRST, SECOND = 40, 25  # events per partition of each batch


@pytest.fixture(scope="module")
def postgres(tmp_path_factory):
    with PrivatePostgres(tmp_path_factory.mktemp("postgres")) as server:
        yield server


def tables_in(postgres: PrivatePostgres, metastore: StandaloneMetastore) -> set[str]:
    """The tables Hive's own schema in PostgreSQL holds for this metastore."""
    out = subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(postgres.port), "-U", postgres.user,
                          "-d", metastore.database, "-At", "-c", 'SELECT "TBL_NAME" FROM "TBLS"'],
                         check=True, capture_output=True, text=True)
    return set(out.stdout.split())


@pytest.mark.parametrize("release", [HIVE_3_1, HIVE_4_0], ids=lambda release: release.cell)
def test_a_batch_a_kill_mid_write_and_recovery_land_every_offset_once_on_the_metastore(
        release, postgres, spark, zk, new_topic, produce, write_config, hive_table_name, warehouse_dir, tmp_path):
    with StandaloneMetastore(tmp_path / "metastore", release, postgres) as metastore:
        topic = new_topic(partitions=2)
        produce(topic, events_by_partition(2, FIRST))
        config = write_config(kafka={"topics": topic}, hive={"metastore": metastore.uri},
                              zookeeper={"session_timeout_seconds": "4"},  # a dead run's lock goes quickly
                              spark=dict(release.spark_settings))
        kill_mid_write(config, topic, zk)  # the first batch: recover and the run after it are the batches
        produce(topic, events_by_partition(2, SECOND, first_id=2 * FIRST))
        recover_or_run(config)
        assert {hive_table_name, f"{hive_table_name}_rejected"} <= tables_in(postgres, metastore)

        with PrivateThriftServer(tmp_path / "thriftserver", metastore) as analysts:
            expected = expected_offsets(topic, {0: FIRST + SECOND, 1: FIRST + SECOND})
            report = check_exactly_once(offsets_reader(spark._jvm, analysts.url), config, expected, warehouse_dir)
    assert report.rows == 2 * (FIRST + SECOND) and "exit 0" in report.verify, report.describe()
    print(f"[{release.cell}] {report.describe()}")
