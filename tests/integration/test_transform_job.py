"""Custom transforms end to end: the worked example (etl.examples) runs on the real stack, and a
transform that raises fails the batch cleanly: nothing published, no temp file, resumable. The
contract on the partition writer, without services: tests/unit/test_transform.py.
"""
from __future__ import annotations

import json
import textwrap
import uuid
from pathlib import Path

import pytest

from etl.config import load_config
from etl.errors import EtlError
from etl.ops.run import run_job
from etl.model.batch import BatchState
from etl.state.store import ZkStateStore


ROOT = Path(__file__).resolve().parents[2]


WEB_REQUESTS = ROOT / "warehouse_schema" / "web_requests.sql"


EXAMPLES = ROOT / "conf" / "examples"


DB = "etl_test"


def explode(table):
    raise ValueError("boom")


def event(i: int) -> bytes:
    return json.dumps({"event_id": i, "user_id": f"u{i}", "action": "click"}).encode()


# -- on the real services ------------------------------------------------------------------------
def web_request(i: int, ip: str | None, status: int) -> bytes:
    return json.dumps({"log_time": f"2017-07-30 14:{i:02d}:{i:02d}", "client_ip": ip, "method": "GET",
                       "path": f"/p{i}", "status": status}).encode()


def test_the_worked_example_derives_minute_and_country_and_rejects_bad_addresses(
        spark, new_topic, produce, write_config, hive_table_name):
    topic = new_topic(partitions=1)
    produce(topic, {0: [web_request(1, "81.2.69.160", 200), web_request(2, "8.8.8.8", 404),
                        web_request(3, "10.1.2.3", 500), web_request(4, None, 299), web_request(5, "not-an-ip", 200),
                        web_request(6, "1.2.3.400", 200)]})
    config = write_config(
        kafka={"topics": topic}, job={"transform": "etl.examples:minute_and_country"},
        hive={"schema": str(WEB_REQUESTS)},
        **{"dimension http_status": {"source": f"file://{EXAMPLES / 'http_status.csv'}", "join_key": "status",
                                     "dimension_key": "code", "columns": "status_text"},
           "dimension ip_ranges": {"source": f"file://{EXAMPLES / 'ip_ranges.csv'}",
                                   "columns": "ip_from, ip_to, country"}})
    assert run_job(load_config(config)) == 0
    rows = spark.sql(f"SELECT kafka_offset, date_format(minute, 'HH:mm:ss') AS minute, country, status_text "
                     f"FROM {DB}.{hive_table_name} ORDER BY kafka_offset").collect()
    assert [tuple(r) for r in rows] == [(0, "14:01:00", "GB", "OK"), (1, "14:02:00", "US", "Not Found"),
                                        (2, "14:03:00", None, "Internal Server Error"), (3, "14:04:00", None, None)]
    rejected = spark.sql(f"SELECT kafka_offset, error FROM {DB}.{hive_table_name}_rejected "
                         f"ORDER BY kafka_offset").collect()
    assert [(r.kafka_offset, r.error) for r in rejected] == [
        (4, "rejected by transform etl.examples:minute_and_country: client_ip 'not-an-ip' is not an IPv4 address"),
        (5, "rejected by transform etl.examples:minute_and_country: client_ip '1.2.3.400' is not an IPv4 address")]


@pytest.fixture
def transform_module(spark, tmp_path, monkeypatch):
    """A module of transforms in the test's folder, importable by the driver and the executors."""
    name = f"transforms_{uuid.uuid4().hex[:8]}"
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent("""
        def explode(table):
            raise ValueError("the lookup service is down")

        def drop_last(table):
            return table.slice(0, table.num_rows - 1)

        def passthrough(table):
            return table
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    spark.sparkContext.addPyFile(str(path))
    return name


def job_state(config):
    loaded = load_config(config)
    with ZkStateStore(loaded.zookeeper, loaded.job.name, loaded.retry) as store:
        return store.batches.last_batch()[0], store.offsets.committed_offsets()


def table_files(warehouse_dir: Path, table: str) -> list[str]:
    return sorted(p.name for p in (warehouse_dir / f"{DB}.db" / table).rglob("*") if p.is_file())


def test_a_transform_that_raises_fails_the_batch_cleanly_and_the_batch_resumes(
        spark, new_topic, produce, write_config, hive_table_name, warehouse_dir, transform_module):
    topic = new_topic(partitions=2)
    produce(topic, {p: [event(p * 10 + i) for i in range(5)] for p in range(2)})
    failing = write_config(kafka={"topics": topic}, job={"transform": f"{transform_module}:explode"})
    with pytest.raises(EtlError, match=rf"transform {transform_module}:explode raised ValueError: the lookup "
                                       rf"service is down") as error:
        run_job(load_config(failing))
    assert error.value.exit_code == 1
    batch, committed = job_state(failing)
    assert batch.state is BatchState.PLANNED and committed == {}
    # No final file. The failing task deleted its temp file; a sibling task that Spark cancelled
    # mid-write may leave one (named _tmp.*, invisible to Hive), which the next run sweeps.
    assert [f for f in table_files(warehouse_dir, hive_table_name) if not f.startswith("_tmp.")] == []

    fixed = write_config(kafka={"topics": topic}, job={"transform": f"{transform_module}:passthrough"})
    assert run_job(load_config(fixed)) == 0
    batch, committed = job_state(fixed)
    assert batch.batch_id == 1 and batch.state is BatchState.COMMITTED and batch.rows == 10
    files = table_files(warehouse_dir, hive_table_name)
    assert len(files) == 2 and not [f for f in files if f.startswith("_")]


def test_a_transform_that_drops_a_row_fails_the_batch(
        spark, new_topic, produce, write_config, hive_table_name, warehouse_dir, transform_module):
    topic = new_topic(partitions=1)
    produce(topic, {0: [event(i) for i in range(3)]})
    config = write_config(kafka={"topics": topic}, job={"transform": f"{transform_module}:drop_last"})
    with pytest.raises(EtlError, match=r"returned 2 rows for 3 records: lost offsets \[2\]"):
        run_job(load_config(config))
    assert job_state(config)[0].state is BatchState.PLANNED
    assert table_files(warehouse_dir, hive_table_name) == []
