"""Custom transforms: `[job] transform = module:function` and its contract.

The contract is checked on the partition writer with real files (no services); then the
worked example (etl.examples) runs end to end, and a transform that raises or drops a row
fails the batch cleanly on the real stack: nothing published, no temp file, resumable.
"""
from __future__ import annotations

import json
from decimal import Decimal
import textwrap
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from etl.model.batch import BatchState
from etl.config import load_config
from etl.rows.decoders import make_decoder
from etl.errors import ConfigError, EtlError, TransformError
from etl.sink.fs import LocalFileSystem
from etl.job.partition_writer import PartitionWriter, WriterSpec
from etl.source.chunk import RawChunk
from etl.job.runner import run_job
from etl.model.schema import load_table_schema
from etl.rows.transform import load_transform
from etl.state.store import ZkStateStore

ROOT = Path(__file__).resolve().parents[1]
EVENTS = ROOT / "warehouse_schema" / "events.sql"
WEB_REQUESTS = ROOT / "warehouse_schema" / "web_requests.sql"
EXAMPLES = ROOT / "conf" / "examples"
DB = "etl_test"


# Transforms for the in-process contract tests (this module is importable as test_transform).
def tag_actions(table):
    return table.set_column(table.schema.get_field_index("action"), "action",
                            pa.repeat(pa.scalar("tagged"), table.num_rows))


def reject_odd_ids(table):
    odd = pc.equal(pc.bit_wise_and(table.column("event_id"), 1), 1)
    return table.append_column("_reject_reason", pc.if_else(odd, pa.scalar("odd id"), pa.scalar(None, pa.string())))


def reversed_rows(table):
    return table.take(pa.array(range(table.num_rows - 1, -1, -1)))


def drop_first(table):
    return table.slice(1)


def duplicate_first(table):
    return pa.concat_tables([table, table.slice(0, 1)])


def move_partition(table):
    return table.set_column(table.schema.get_field_index("kafka_partition"), "kafka_partition",
                            pa.repeat(pa.scalar(9, pa.int32()), table.num_rows))


def forget_a_column(table):
    return table.drop_columns(["ok"])


def explode(table):
    raise ValueError("boom")


def two_args(table, lookups):
    return table


def three_args(a, b, c):
    return a


NOT_CALLABLE = 42


# Transforms whose values Hive or Spark cannot read back (over PRICED_SQL's columns).
def _odd(table):
    return pc.equal(pc.bit_wise_and(table.column("event_id"), 1), 1)


def far_future_ts(table):
    year_10000 = pa.scalar(253_402_300_800_000, pa.timestamp("ms"))  # 10000-01-01 00:00:00 UTC
    return table.set_column(table.schema.get_field_index("ts"), "ts",
                            pc.if_else(_odd(table), year_10000, table.column("ts")))


def unscaled_price(table):
    # A decimal(10,2) array holding 10^10: what cast(safe=False) or a careless kernel gives.
    too_big = pa.array([Decimal("10000000000.00")] * table.num_rows, pa.decimal128(20, 2))
    too_big = too_big.cast(pa.decimal128(10, 2), safe=False)
    return table.set_column(table.schema.get_field_index("price"), "price",
                            pc.if_else(_odd(table), too_big, table.column("price")))


def huge_ratio(table):
    return table.set_column(table.schema.get_field_index("ratio"), "ratio",
                            pa.array([1e39] * table.num_rows, pa.float64()))




def spec_with(transform: str) -> WriterSpec:
    schema = load_table_schema(EVENTS)
    return WriterSpec(schema, make_decoder("json", schema), None, 1000, "snappy", transform=transform)


def event(i: int) -> bytes:
    return json.dumps({"event_id": i, "user_id": f"u{i}", "action": "click"}).encode()


def write(tmp_path: Path, transform: str, count: int = 4):
    main, rejected = str(tmp_path / "_tmp.main"), str(tmp_path / "_tmp.rejected")
    with PartitionWriter(LocalFileSystem(), spec_with(f"test_transform:{transform}"), "t", 2, main, rejected) as w:
        w.write(RawChunk(list(range(100, 100 + count)), [0] * count, None, [event(i) for i in range(count)]))
    return w.close(), main, rejected


# -- the contract, on real files ------------------------------------------------------------------
def test_a_transform_changes_columns_of_every_row(tmp_path):
    counts, main, _ = write(tmp_path, "tag_actions")
    assert counts.rows == 4 and pq.read_table(main).column("action").to_pylist() == ["tagged"] * 4


def test_rows_a_transform_rejects_go_to_the_rejected_file_with_raw_message_and_reason(tmp_path):
    counts, main, rejected = write(tmp_path, "reject_odd_ids")
    assert (counts.rows, counts.rejected) == (2, 2)
    assert pq.read_table(main).column("kafka_offset").to_pylist() == [100, 102]
    bad = pq.read_table(rejected).to_pylist()
    assert [r["kafka_offset"] for r in bad] == [101, 103] and bad[0]["raw_value"] == event(1)
    assert bad[0]["error"] == "rejected by transform test_transform:reject_odd_ids: odd id"


def test_rows_returned_in_another_order_are_written_in_offset_order(tmp_path):
    _, main, _ = write(tmp_path, "reversed_rows")
    assert pq.read_table(main).column("kafka_offset").to_pylist() == [100, 101, 102, 103]


@pytest.mark.parametrize("transform, message", [
    ("drop_first", r"returned 3 rows for 4 records: lost offsets \[100\].*never drop it"),
    ("duplicate_first", r"returned 5 rows for 4 records: 1 duplicated rows"),
    ("move_partition", r"changed column 'kafka_partition', which the ETL fills"),
    ("forget_a_column", r"returned columns .* missing \['ok'\]"),
    ("explode", r"transform test_transform:explode raised ValueError: boom \(t\[2\] offsets 100\.\.103\)"),
])
def test_a_transform_that_breaks_the_contract_fails_and_leaves_no_file(tmp_path, transform, message):
    with pytest.raises(TransformError, match=message) as error:
        write(tmp_path, transform)
    assert "the batch stays PLANNED" in str(error.value)
    assert list(tmp_path.iterdir()) == []  # both temp files aborted


PRICED_SQL = ("CREATE TABLE ${database}.${table} (event_id bigint, user_id string, action string, "
              "price decimal(10,2), ratio float, ts timestamp, kafka_topic string, kafka_partition int, "
              "kafka_offset bigint, kafka_timestamp timestamp) PARTITIONED BY (dt string, hour string) "
              "LOCATION '${location}'")


def write_priced(tmp_path: Path, transform: str):
    ddl = tmp_path / "priced.sql"
    ddl.write_text(PRICED_SQL)
    schema = load_table_schema(ddl)
    spec = WriterSpec(schema, make_decoder("json", schema), None, 1000, "snappy", transform=f"test_transform:{transform}")
    main, rejected = str(tmp_path / "_tmp.main"), str(tmp_path / "_tmp.rejected")
    values = [json.dumps({"event_id": i, "price": "1.50", "ts": "2017-07-30 14:09:08"}).encode() for i in range(4)]
    with PartitionWriter(LocalFileSystem(), spec, "t", 2, main, rejected) as w:
        w.write(RawChunk(list(range(100, 104)), [0] * 4, None, values))
    return w.close(), main, rejected


@pytest.mark.parametrize("transform, reason", [
    ("far_future_ts", "column 'ts': 10000-01-01 00:00:00.000 is outside the range Hive and Spark read back "
                      "(0001-01-02 00:00:00 .. 9999-12-30 23:59:59.999 UTC)"),
    ("unscaled_price", "column 'price': 10000000000.00 does not fit decimal(10,2), which holds "
                       "-99999999.99 .. 99999999.99"),
])
def test_values_a_transform_returns_that_hive_cannot_read_back_go_to_the_rejected_file(tmp_path, transform, reason):
    counts, main, rejected = write_priced(tmp_path, transform)
    assert (counts.rows, counts.rejected) == (2, 2)
    assert pq.read_table(main).column("kafka_offset").to_pylist() == [100, 102]
    bad = pq.read_table(rejected).to_pylist()
    assert [r["kafka_offset"] for r in bad] == [101, 103]
    assert bad[0]["error"] == f"after transform test_transform:{transform}: {reason}"


def test_a_transform_returning_a_double_beyond_a_float_column_fails_like_any_lossy_cast(tmp_path):
    with pytest.raises(TransformError, match=r"returned column 'ratio' as double, which does not fit float: 1e\+39 "
                                             r"is too large for float"):
        write_priced(tmp_path, "huge_ratio")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["priced.sql"]


def test_a_transform_is_checked_at_start_up():
    assert load_transform("test_transform:two_args")[1] == 2
    assert load_transform("test_transform:explode")[1] == 1
    for spec, message in [("no_such_module_x:f", r"\[job\] transform: cannot import module 'no_such_module_x'"),
                          ("test_transform:missing", r"\[job\] transform: test_transform has no function 'missing'"),
                          ("test_transform:NOT_CALLABLE", r"has no function 'NOT_CALLABLE'"),
                          ("test_transform:three_args", r"must take \(table\) or \(table, lookups\)")]:
        with pytest.raises(ConfigError, match=message):
            load_transform(spec)


def test_the_example_config_passes_the_start_up_checks():
    from etl.job.runner import writer_spec
    config = load_config(ROOT / "conf" / "web_requests.ini")
    spec = writer_spec(config)
    assert spec.transform == "etl.examples:minute_and_country"
    assert [(d.name, d.joined) for d in spec.dimensions] == [("http_status", True), ("ip_ranges", False)]


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
        return store.last_batch()[0], store.committed_offsets()


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
