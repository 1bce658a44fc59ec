"""The merge (etl.compaction.merge) keeps every timestamp Hive accepts, and refuses to publish a file whose
values are not its inputs': real Parquet files on the local filesystem, written by ParquetSink as a
batch writes them (INT96 timestamps), read back with pyarrow.

pyarrow reads INT96 as nanoseconds unless told otherwise, and nanoseconds hold only 1677-09-21 ..
2262-04-11: the merge used to write 9999-12-30 back as 1816-03-28 05:56:08.066277.
"""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from etl.config.model import HiveFormat
from etl.model.schema import arrow_schema, load_table_schema
from etl.sink.fs import LocalFileSystem
from etl.sink.layout import FileLayout
from etl.compaction.merge import merge_files
from etl.sink.checksums import CHECKSUMS_KEY
from etl.sink.file_format import open_sink

SCHEMAS = Path(__file__).resolve().parents[2] / "warehouse_schema"
TIMES = [dt.datetime(9999, 12, 30), dt.datetime(1500, 6, 1, 12), dt.datetime(1, 1, 2),
         dt.datetime(9999, 12, 30, 23, 59, 59, 999000), dt.datetime(2026, 11, 20, 10, 15), None]


def batch_table(first: int, times: list) -> pa.Table:
    """Rows of warehouse_schema/events.sql, as the row pipeline hands them to ParquetSink."""
    schema = arrow_schema(load_table_schema(SCHEMAS / "events.sql"))
    n = len(times)
    columns = {"event_id": list(range(first, first + n)), "user_id": [f"u{i}" for i in range(n)],
               "action": [None if i % 2 else "click" for i in range(n)], "amount": [i / 4 for i in range(n)],
               "ts": times, "ok": [i % 3 == 0 for i in range(n)], "kafka_topic": ["events"] * n,
               "kafka_partition": [0] * n, "kafka_offset": list(range(first, first + n)),
               "kafka_timestamp": list(reversed(times))}
    return pa.Table.from_pydict(columns, schema=schema)


def write_batch_file(path: Path, table: pa.Table, row_group_size: int = 2, layout: FileLayout = FileLayout()) -> str:
    sink = open_sink(LocalFileSystem(), str(path), table.schema, row_group_size, layout)
    sink.append(table)
    sink.close()
    return str(path)


def batch_files(tmp_path: Path) -> tuple[list[str], pa.Table]:
    tables = [batch_table(0, TIMES), batch_table(6, TIMES[3:]), batch_table(9, TIMES[:2])]
    folder = tmp_path / "dt=2026-11-20" / "hour=10"
    folder.mkdir(parents=True)
    paths = [write_batch_file(folder / f"events+0+{i}.parquet", t) for i, t in enumerate(tables)]
    return paths, pa.concat_tables(tables)


def read_exact(path: str) -> pa.Table:
    return pq.read_table(path, coerce_int96_timestamp_unit="ms")


def merge(paths: list[str], target: Path) -> int:
    return merge_files(LocalFileSystem(), paths, str(target), [(0, 11)], row_group_size=4, layout=FileLayout())


def test_a_merge_keeps_timestamps_from_year_1_to_9999(tmp_path):
    paths, written = batch_files(tmp_path)
    target = tmp_path / "merged.parquet"
    assert merge(paths, target) == written.num_rows
    merged = read_exact(str(target))
    for column in ("ts", "kafka_timestamp"):
        assert merged.column(column).to_pylist() == written.column(column).to_pylist(), column
    assert merged.select(["event_id", "user_id", "action", "amount", "ok"]).to_pylist() == \
        written.select(["event_id", "user_id", "action", "amount", "ok"]).to_pylist()


def test_the_merged_file_records_checksums_equal_to_its_values_read_back(tmp_path):
    from etl.sink.checksums import file_checksums, recorded
    paths, written = batch_files(tmp_path)
    target = tmp_path / "merged.parquet"
    merge(paths, target)
    own = recorded(pq.ParquetFile(target).metadata.metadata)
    assert own is not None and own.rows == written.num_rows and set(own.columns) == set(written.column_names)
    schema = pq.ParquetFile(target).schema_arrow
    assert file_checksums(LocalFileSystem(), str(target), schema, HiveFormat.PARQUET) == own


def test_a_merge_reading_int96_as_nanoseconds_is_refused_and_publishes_nothing(tmp_path, monkeypatch):
    """The bug itself, put back: the merge's own read wraps the far dates; its checksums, taken by a
    read of their own, see it, and nothing is left at the target."""
    from etl.compaction import merge as merge_module
    monkeypatch.setattr(merge_module, "INT96_UNIT", "ns")
    paths, _ = batch_files(tmp_path)
    target = tmp_path / "merged.parquet"
    with pytest.raises(merge_module.MergeAltered, match=r"changed the values of column 'ts' and 1 more"):
        merge(paths, target)
    assert not target.exists()


def test_a_merge_that_changes_one_value_is_refused(tmp_path, monkeypatch):
    from etl.compaction import merge as merge_module
    conformed = merge_module._conformed

    def one_amount_off(table, schema):
        table = conformed(table, schema)
        amounts = table.column("amount").to_pylist()
        amounts[-1] += 0.25
        return table.set_column(table.schema.get_field_index("amount"), schema.field("amount"),
                                pa.array(amounts, pa.float64()))

    monkeypatch.setattr(merge_module, "_conformed", one_amount_off)
    paths, _ = batch_files(tmp_path)
    target = tmp_path / "merged.parquet"
    with pytest.raises(merge_module.MergeAltered, match=r"column 'amount'"):
        merge(paths, target)
    assert not target.exists()


def changed_by_hand(path: str, column: str = "user_id") -> None:
    """The same rows and footer, one value changed: what a merge that altered a value would have
    published (pyarrow's read_table drops the footer's keys: they are put back)."""
    footer = {k: v for k, v in pq.ParquetFile(path).metadata.metadata.items() if k.startswith(b"etl.")}
    table = pq.read_table(path, coerce_int96_timestamp_unit="us")
    values = table.column(column).to_pylist()
    values[1] = "someone else"
    table = table.set_column(table.schema.get_field_index(column), column, pa.array(values, pa.string()))
    pq.write_table(table.replace_schema_metadata(footer), path, use_deprecated_int96_timestamps=True)
    assert pq.ParquetFile(path).metadata.metadata.keys() >= footer.keys()


def test_a_merged_input_changed_since_its_merge_is_refused(tmp_path):
    from etl.compaction.merge import MergeAltered
    paths, _ = batch_files(tmp_path)
    first = tmp_path / "first.parquet"
    merge(paths[:2], first)
    changed_by_hand(str(first))
    with pytest.raises(MergeAltered, match=rf"{first} does not hold the values recorded .*column 'user_id'"):
        merge([str(first), paths[2]], tmp_path / "again.parquet")
    assert not (tmp_path / "again.parquet").exists()


def test_a_merged_input_stripped_of_its_checksums_is_refused_when_its_record_says_it_has_them(tmp_path):
    """The merge's side of the same downgrade: an input rewritten without `etl.checksums` (one value
    changed) was merged unchecked, and the new file's checksums then vouched for the change."""
    from etl.compaction.merge import MergeAltered
    paths, _ = batch_files(tmp_path)
    first = tmp_path / "first.parquet"
    merge(paths[:2], first)
    stripped_and_changed(str(first))
    again = tmp_path / "again.parquet"
    with pytest.raises(MergeAltered, match=rf"{first} has no `etl.checksums` in its footer, yet its compaction's"):
        merge_files(LocalFileSystem(), [str(first), paths[2]], str(again), [(0, 11)], 4, FileLayout(),
                    proven={str(first)})
    assert not again.exists()
    assert merge([str(first), paths[2]], again) == 11  # an older version's record says nothing: merged as before


def test_verify_deep_names_a_merged_file_changed_by_hand(tmp_path):
    from etl.model.naming import FileRange
    from etl.ops.inventory import Inventory, WarehouseFile
    from etl.ops.verify_deep import check_rewritten
    paths, _ = batch_files(tmp_path)
    target = tmp_path / "merged.parquet"
    merge(paths, target)
    inventory = Inventory(files=[WarehouseFile(str(target), "dt=2026-11-20/hour=10", FileRange("events", 0, 0, 11))]
                          + [WarehouseFile(p, "dt=2026-11-20/hour=10", FileRange("events", 0, i, i + 1))
                             for i, p in enumerate(paths)])
    assert check_rewritten(LocalFileSystem(), inventory, {}, ()) == []  # batch files carry no checksum: skipped
    changed_by_hand(str(target))
    [problem] = check_rewritten(LocalFileSystem(), inventory, {}, ())
    assert (problem.kind, problem.where) == ("altered_file", str(target))
    assert "column 'user_id'" in problem.detail and "11 rows, recorded 11" in problem.detail


def stripped_and_changed(path: str) -> None:
    """One value changed and the footer's keys put back, all but `etl.checksums`: a merged file
    that no longer says it must be checked."""
    changed_by_hand(path)
    footer = pq.ParquetFile(path).metadata.metadata
    table = pq.read_table(path, coerce_int96_timestamp_unit="us")
    kept = {k: v for k, v in footer.items() if k.startswith(b"etl.") and k != CHECKSUMS_KEY}
    pq.write_table(table.replace_schema_metadata(kept), path, use_deprecated_int96_timestamps=True)
    assert CHECKSUMS_KEY not in pq.ParquetFile(path).metadata.metadata and b"etl.ranges" in kept


def test_verify_deep_asks_zookeeper_not_the_file_whether_a_merged_file_must_carry_checksums(tmp_path):
    """A merged file rewritten without its `etl.checksums` key (one value changed) passed as one
    merged before checksums existed. Its compaction's record says its merge recorded them: it
    is named. A compaction with no such record (an older version's) keeps today's behaviour."""
    from etl.model.compaction import compacted_folder
    from etl.model.naming import FileRange, final_name
    from etl.ops.inventory import Inventory, WarehouseFile
    from etl.ops.verify_deep import check_rewritten
    paths, _ = batch_files(tmp_path)
    folder = tmp_path / "events" / compacted_folder("dt=2026-11-20/hour=10", 3)
    folder.mkdir(parents=True)
    target = folder / final_name("events", 0, 0, 11)
    merge(paths, target)
    stripped_and_changed(str(target))
    inventory = Inventory(files=[WarehouseFile(str(target), "dt=2026-11-20/hour=10", FileRange("events", 0, 0, 11))])
    fs, record = LocalFileSystem(), {3: frozenset({target.name})}
    [problem] = check_rewritten(fs, inventory, record, ())
    assert (problem.kind, problem.where) == ("altered_file", str(target))
    assert "has no `etl.checksums`" in problem.detail and "compaction 3's record" in problem.detail
    assert "etl recover" in problem.action
    assert check_rewritten(fs, inventory, {}, ()) == []  # merged by an older version: no record, not compared
    assert check_rewritten(fs, inventory, {3: frozenset({"other.parquet"})}, ()) == []  # written there later
    assert check_rewritten(fs, inventory, {4: record[3]}, ()) == []  # another compaction's folder
    assert check_rewritten(fs, inventory, record, {str(target)}) == []  # rewritten by `etl recover` since


def test_checksums_do_not_depend_on_chunks_or_time_unit_and_see_every_change():
    from etl.sink.checksums import TableDigest
    table = batch_table(0, TIMES)

    def digest(*tables):
        found = TableDigest(table.schema)
        for t in tables:
            found.add(t)
        return found.result()

    whole = digest(table)
    assert digest(table.slice(0, 1), table.slice(1, 4), table.slice(5)) == whole
    in_us = table.cast(pa.schema([f.with_type(pa.timestamp("us")) if pa.types.is_timestamp(f.type) else f
                                  for f in table.schema]))
    assert digest(in_us) == whole
    for column, row, value in (("ts", 0, dt.datetime(1816, 3, 28, 5, 56, 8)), ("action", 1, "click"),
                               ("action", 0, None), ("amount", 2, 0.75), ("ok", 0, False), ("user_id", 3, "u3 ")):
        values = table.column(column).to_pylist()
        assert values[row] != value
        values[row] = value
        changed = table.set_column(table.schema.get_field_index(column), table.schema.field(column),
                                   pa.array(values, table.schema.field(column).type))
        assert whole.differing(digest(changed)) == [column], (column, row, value)


def test_a_merge_keeps_the_widest_decimals_and_its_checksums_hold(tmp_path):
    """decimal(38,2) at its largest both ways (wider than Python's 28-digit context), through
    the merge and the value checksums it records and proves."""
    from decimal import Decimal
    from etl.sink.checksums import file_checksums, recorded
    widest = Decimal("9" * 36 + ".99")
    schema = pa.schema([("id", pa.int64()), ("wide", pa.decimal128(38, 2))])
    tables = [pa.table({"id": [0, 1, 2], "wide": [widest, widest.copy_negate(), None]}, schema=schema),
              pa.table({"id": [3, 4], "wide": [Decimal("0.01"), widest]}, schema=schema)]
    paths = [write_batch_file(tmp_path / f"w+0+{i}.parquet", t) for i, t in enumerate(tables)]
    target = tmp_path / "merged.parquet"
    assert merge_files(LocalFileSystem(), paths, str(target), [(0, 5)], row_group_size=4, layout=FileLayout()) == 5
    assert read_exact(str(target)).to_pylist() == pa.concat_tables(tables).to_pylist()
    own = recorded(pq.ParquetFile(target).metadata.metadata)
    assert own is not None and own.rows == 5
    assert file_checksums(LocalFileSystem(), str(target), schema, HiveFormat.PARQUET) == own
