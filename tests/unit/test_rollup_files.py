"""A rollup's partials against its table's files, without Spark or services
(etl.ops.rollup_files, etl.job.rollup_task): a file's partial written from its rows, a merged
file's one partial of all its ranges, named by the file, and what `etl verify --deep` names: a
partial missing, changed, or of no file the table holds."""
from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from etl.config.rollup_filter import parse_filter
from etl.config.rollup_terms import parse_aggregates, parse_group_by
from etl.config.rollups import RollupConfig
from etl.job.rollup_task import partial_rows, publish_partials
from etl.model.naming import FileRange
from etl.model.rollup_table import RollupSpec
from etl.model.schema import Column, TableSchema
from etl.ops.inventory import WarehouseFile
from etl.ops.rollup_files import check_partials, file_rows, orphan_partials, partial_path
from etl.sink.fs.local import LocalFileSystem
from etl.sink.layout import FileLayout
from etl.sink.warehouse import Warehouse

SCHEMA = TableSchema((Column("level", "string"), Column("ts", "timestamp"), Column("kafka_topic", "string"),
                      Column("kafka_partition", "int"), Column("kafka_offset", "bigint")),
                     (Column("dt", "string"), Column("hour", "string")))
SPEC = RollupSpec.of(RollupConfig("errors", "errors", "", parse_filter("level = 'ERROR'"), parse_group_by("minute(ts)"),
                                  parse_aggregates("count(*) as errors, max(kafka_offset) as last")), "t", SCHEMA)
PARTITION = "dt=2026-11-30/hour=10"


def _rows(partition: int, start: int, end: int) -> pa.Table:
    offsets = list(range(start, end))
    return pa.table({"level": ["ERROR" if o % 3 else "INFO" for o in offsets],
                     "ts": pa.array([dt.datetime(2026, 11, 30, 10, o % 4) for o in offsets], pa.timestamp("ms")),
                     "kafka_topic": ["t"] * len(offsets), "kafka_partition": pa.array([partition] * len(offsets),
                                                                                     pa.int32()),
                     "kafka_offset": pa.array(offsets, pa.int64())})


def _table(tmp_path):
    """A table of two files: one range's, and a merged one holding two ranges of partition 1."""
    fs, warehouse = LocalFileSystem(), Warehouse(str(tmp_path), str(tmp_path), str(tmp_path / "db.db"),
                                                  str(tmp_path / "db.db" / "t"), str(tmp_path / "db.db" / "r"))
    folder = tmp_path / "db.db" / "t" / PARTITION
    folder.mkdir(parents=True)
    one, first, second = FileRange("t", 0, 0, 10), FileRange("t", 1, 0, 7), FileRange("t", 1, 7, 12)
    pq.write_table(_rows(0, 0, 10), folder / f"{one.stem}.parquet")
    merged = f"{FileRange('t', 1, 0, 12).stem}.parquet"
    pq.write_table(pa.concat_tables([_rows(1, 0, 7), _rows(1, 7, 12)]), folder / merged)
    files = [WarehouseFile(str(folder / f"{one.stem}.parquet"), PARTITION, one),
             WarehouseFile(str(folder / merged), PARTITION, first),
             WarehouseFile(str(folder / merged), PARTITION, second)]
    return fs, warehouse, files


def _publish_all(fs, warehouse, files) -> None:
    for file, rows in file_rows(fs, SPEC, files):
        folder = warehouse.partials_dir(SPEC.partials_table, file.partition_path)
        stem = file.path.rsplit("/", 1)[1].rsplit(".", 1)[0]
        publish_partials(fs, (SPEC,), (folder,), file.path, FileLayout(), stem, file.range.partition, rows=rows)


def test_a_merged_file_has_one_partial_of_all_its_ranges_named_by_the_file(tmp_path):
    fs, warehouse, files = _table(tmp_path)
    found = {file.path: rows.num_rows for file, rows in file_rows(fs, SPEC, files)}
    assert found == {files[0].path: 10, files[1].path: 12}  # the merged file read once
    _publish_all(fs, warehouse, files)
    assert partial_path(warehouse, SPEC.partials_table, files[1]) == \
        partial_path(warehouse, SPEC.partials_table, files[2]) == \
        str(tmp_path / "db.db" / "errors_partials" / PARTITION / files[1].path.rsplit("/", 1)[1])
    merged = pq.read_table(partial_path(warehouse, SPEC.partials_table, files[2]))
    assert sum(merged["errors"].to_pylist()) == sum(1 for o in range(12) if o % 3) and \
        max(merged["last"].to_pylist()) == 11
    assert check_partials(fs, warehouse, SPEC, files) == []
    assert orphan_partials(fs, warehouse, (SPEC.rollup,), files) == []
    # the merged file deleted by hand: its partial is `etl recover`'s to move out
    assert orphan_partials(fs, warehouse, (SPEC.rollup,), files[:1]) == \
        [partial_path(warehouse, SPEC.partials_table, files[1])]


def test_verify_deep_names_a_partial_missing_changed_or_of_no_range(tmp_path):
    fs, warehouse, files = _table(tmp_path)
    _publish_all(fs, warehouse, files)
    missing, changed = (partial_path(warehouse, SPEC.partials_table, file) for file in files[:2])
    (tmp_path / "gone").write_bytes(open(missing, "rb").read())
    fs.delete(missing)
    table = pq.read_table(changed)
    pq.write_table(table.set_column(1, "errors", pc.add(table["errors"], 1)), changed)
    stray = tmp_path / "db.db" / "errors_partials" / PARTITION / "t+0+00000000000000000010+00000000000000000020.parquet"
    stray.write_bytes((tmp_path / "gone").read_bytes())
    found = {(p.kind, p.where) for p in check_partials(fs, warehouse, SPEC, files)}
    assert found == {("rollup_partial_missing", missing), ("rollup_partial_differs", changed),
                     ("rollup_partial_stray", str(stray))}
    # an open batch's range is its run's: its missing partial is no problem yet
    kinds = {p.kind for p in check_partials(fs, warehouse, SPEC, files, unfinished={files[0].range})}
    assert kinds == {"rollup_partial_differs", "rollup_partial_stray"}
    # `etl verify` without --deep reads no data file: a partial missing or of no range, not one changed
    kinds = {p.kind for p in check_partials(fs, warehouse, SPEC, files, deep=False)}
    assert kinds == {"rollup_partial_missing", "rollup_partial_stray"}


def test_a_partial_in_place_is_kept_as_a_data_file_is(tmp_path):
    fs, warehouse, files = _table(tmp_path)
    _publish_all(fs, warehouse, files)
    path = partial_path(warehouse, SPEC.partials_table, files[0])
    before = open(path, "rb").read()
    folder = warehouse.partials_dir(SPEC.partials_table, PARTITION)
    assert publish_partials(fs, (SPEC,), (folder,), files[0].path, FileLayout(), files[0].range.stem, 0) == 0
    assert open(path, "rb").read() == before
    assert partial_rows(SPEC, _rows(0, 0, 10)).num_rows == 4  # four minutes, each with errors


def test_partials_at_the_edges_read_back_exactly_in_both_file_layouts(tmp_path):
    """Years 1 and 9999 bucketed and kept as minimum and maximum, and the largest decimal(28,2)
    summed into decimal(38,2), through the partials' writer (INT96 for Hive 2.3's readers, INT64
    microseconds for current ones) and back: `etl verify --deep`'s comparison finds them equal."""
    from decimal import Decimal

    from etl.config.model import ParquetReaders
    schema = TableSchema((Column("price", "decimal(28,2)"), Column("ts", "timestamp"), Column("kafka_topic", "string"),
                          Column("kafka_partition", "int"), Column("kafka_offset", "bigint")), SCHEMA.partition_columns)
    spec = RollupSpec.of(RollupConfig("edges", "edges", "", None, parse_group_by("day(ts)"),
                                      parse_aggregates("sum(price) as spent, min(ts) as first, max(ts) as last")),
                         "t", schema)
    largest = Decimal("9" * 26 + ".99")
    stamps = [dt.datetime(1, 1, 1, 0, 0, 0, 1000), dt.datetime(1, 1, 1, 23, 59),
              dt.datetime(9999, 12, 31, 23, 59, 59, 999000)]
    rows = pa.table({"price": pa.array([largest] * 3, pa.decimal128(28, 2)), "ts": pa.array(stamps, pa.timestamp("ms")),
                     "kafka_topic": ["t"] * 3, "kafka_partition": pa.array([0] * 3, pa.int32()),
                     "kafka_offset": pa.array([0, 1, 2], pa.int64())})
    for readers in ParquetReaders:
        fs, warehouse, _ = _table(tmp_path / readers.value)
        folder = tmp_path / readers.value / "db.db" / "t" / PARTITION
        name = f"{FileRange('t', 0, 0, 3).stem}.parquet"
        pq.write_table(rows, folder / name)
        file = WarehouseFile(str(folder / name), PARTITION, FileRange("t", 0, 0, 3))
        publish_partials(fs, (spec,), (warehouse.partials_dir(spec.partials_table, PARTITION),), file.path,
                         FileLayout(readers=readers), file.range.stem, 0)
        assert check_partials(fs, warehouse, spec, [file]) == [], readers
        found = partial_rows(spec, rows).sort_by("ts_day").to_pylist()
        assert [(r["ts_day"], r["spent"], r["first"], r["last"]) for r in found] == [
            (dt.datetime(1, 1, 1), Decimal("1" + "9" * 26 + ".98"), stamps[0], stamps[1]),  # exact: 28 digits
            (dt.datetime(9999, 12, 31), largest, stamps[2], stamps[2])]


def test_a_fold_of_partials_is_one_pass_over_their_rows():
    """What a compaction writes for a merged file (etl.compaction.partials): the partials of its
    ranges folded by the names and functions its record holds equal the partial of all their rows."""
    from etl.model.rollup_table import folded
    ranges = [partial_rows(SPEC, _rows(1, a, b)) for a, b in ((0, 7), (7, 12), (12, 30))]
    merges = [(a.name, a.function.merged_by.value) for a in SPEC.rollup.aggregates]
    fold = folded(ranges, [key.name for key in SPEC.rollup.group_by], merges)
    whole = partial_rows(SPEC, _rows(1, 0, 30))
    assert fold.schema == whole.schema and fold.sort_by("ts_minute").to_pylist() == \
        whole.sort_by("ts_minute").to_pylist()
