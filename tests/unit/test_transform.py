"""Custom transforms: `[job] transform = module:function` and its contract, checked on the
partition writer with real files (no services).

The transforms are named `test_transform:<function>`: this module, which pytest imports under
its base name (tests/unit has no __init__.py), so the file keeps its name. End to end on the real
stack (the worked example, a transform that raises): tests/integration/test_transform_job.py.
"""
from __future__ import annotations

import json
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from etl.config import DimensionConfig, DimensionKind, load_config
from etl.errors import ConfigError, TransformError
from etl.job.partition_writer import PartitionWriter, WriterSpec
from etl.model.schema import load_table_schema
from etl.rows.decoders import make_decoder
from etl.rows.transform import load_transform
from etl.sink.fs import LocalFileSystem
from etl.source.chunk import RawChunk
from etl.sink.layout import FileLayout


ROOT = Path(__file__).resolve().parents[2]


EVENTS = ROOT / "warehouse_schema" / "events.sql"


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


HANDED: list[list[str]] = []  # the lookups record_lookups was handed, call by call


def record_lookups(table, lookups):
    HANDED.append(sorted(lookups))
    return table


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
    return WriterSpec(schema, make_decoder("json", schema), None, 1000, FileLayout(), transform=transform)


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
    spec = WriterSpec(schema, make_decoder("json", schema), None, 1000, FileLayout(),
                      transform=f"test_transform:{transform}")
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
    from etl.job.assemble import writer_spec
    config = load_config(ROOT / "conf" / "web_requests.ini")
    spec = writer_spec(config)
    assert spec.transform == "etl.examples:minute_and_country"
    assert [(d.name, d.joined) for d in spec.dimensions] == [("http_status", True), ("ip_ranges", False)]


def test_a_transform_is_handed_only_the_dimensions_its_route_lists(tmp_path):
    """With routes, one batch loads every route's dimensions; a route's transform sees its own."""
    tiers = DimensionConfig(name="tiers", source="hive:d.tiers", kind=DimensionKind.HIVE, path=None, format=None,
                            table="d.tiers", join_key=None, dimension_key=None, columns=("tier",))
    spec = replace(spec_with("test_transform:record_lookups"), dimensions=(tiers,))
    lookups = {"tiers": pa.table({"tier": ["gold"]}), "countries": pa.table({"code": ["DE"]})}
    HANDED.clear()
    main, rejected = str(tmp_path / "_tmp.main"), str(tmp_path / "_tmp.rejected")
    with PartitionWriter(LocalFileSystem(), spec, "t", 0, main, rejected, lookups) as writer:
        writer.write(RawChunk([0, 1], [0, 0], None, [event(0), event(1)]))
    writer.close()
    assert HANDED == [["tiers"]]
