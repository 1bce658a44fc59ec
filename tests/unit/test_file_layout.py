"""The files' layout (etl.sink.layout) as the files show it: each column's encoding chosen from what
it holds and from the readers the table serves, the timestamps' physical type, the page index,
bloom filters DuckDB probes, and row groups sorted and declared so. The values read back are
the values written, years 1 and 9999 included, in both layouts."""
from __future__ import annotations

import datetime as dt
import json

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from etl.config.model import HiveFormat
from etl.config.model import Compression, ParquetReaders
from etl.errors import ConfigError
from etl.sink.checksums import file_checksums
from etl.sink.fs import LocalFileSystem
from etl.sink.layout import FileLayout
from etl.sink.parquet import ParquetSink
from tests.harness.config_file import minimal_ini
from etl.config import load_config

UTC = dt.timezone.utc
ROWS = 4000
SCHEMA = pa.schema([("event_id", pa.int64()), ("user_id", pa.string()), ("amount", pa.float64()),
                    ("ts", pa.timestamp("ms", tz="UTC")), ("ok", pa.bool_()), ("kafka_offset", pa.int64())])


def rows(first: int = 0, count: int = ROWS) -> pa.Table:
    ids = range(first, first + count)
    return pa.table({
        "event_id": [i * 7919 % 1_000_003 for i in ids],  # unique, unordered
        "user_id": [f"u{i % 13}" for i in ids],  # repeats
        "amount": [i * 1.37 for i in ids],  # unique floats
        "ts": [dt.datetime(2026, 11, 29, tzinfo=UTC) + dt.timedelta(milliseconds=i) for i in ids],
        "ok": [i % 3 == 0 for i in ids],
        "kafka_offset": list(ids),
    }, schema=SCHEMA)


def write(path, layout: FileLayout, table: pa.Table, row_group_size: int = 1000) -> pq.FileMetaData:
    sink = ParquetSink(LocalFileSystem(), str(path), SCHEMA, row_group_size, layout)
    sink.open()  # as the writers do, before any row: the encodings still come from the first row group
    sink.append(table)
    sink.close()
    return pq.ParquetFile(path).metadata


def encodings(metadata: pq.FileMetaData) -> dict[str, tuple[str, set[str]]]:
    chunk = metadata.row_group(0)
    return {chunk.column(i).path_in_schema: (chunk.column(i).physical_type, set(chunk.column(i).encodings))
            for i in range(chunk.num_columns)}


def test_hive_2_3_files_keep_int96_and_plain_or_dictionary_pages(tmp_path):
    found = encodings(write(tmp_path / "f.parquet", FileLayout(), rows()))
    assert found["ts"][0] == "INT96"
    assert "RLE_DICTIONARY" in found["user_id"][1]  # values repeat: a dictionary pays
    for unique in ("event_id", "amount", "kafka_offset"):  # each value once: no dictionary built for nothing
        assert found[unique][1] <= {"PLAIN", "RLE"}, (unique, found[unique])
    assert not any(enc.startswith(("DELTA", "BYTE_STREAM")) for _, encs in found.values() for enc in encs)


def test_current_readers_get_delta_encodings_and_int64_timestamps(tmp_path):
    found = encodings(write(tmp_path / "f.parquet", FileLayout(Compression.ZSTD, ParquetReaders.CURRENT), rows()))
    assert "DELTA_BINARY_PACKED" in found["event_id"][1]
    assert "DELTA_BINARY_PACKED" in found["kafka_offset"][1]
    assert found["amount"][1] <= {"PLAIN", "RLE"}  # Spark's vectorized reader refuses BYTE_STREAM_SPLIT
    assert found["ts"][0] == "INT64" and "DELTA_BINARY_PACKED" in found["ts"][1]
    assert "RLE_DICTIONARY" in found["user_id"][1]
    assert pq.ParquetFile(tmp_path / "f.parquet").metadata.row_group(0).column(0).compression == "ZSTD"


def test_unique_strings_get_delta_byte_array_for_current_readers(tmp_path):
    schema = pa.schema([("url", pa.string())])
    table = pa.table({"url": [f"https://shop.example/p/{i}" for i in range(ROWS)]}, schema=schema)
    sink = ParquetSink(LocalFileSystem(), str(tmp_path / "u.parquet"), schema, 1000,
                       FileLayout(readers=ParquetReaders.CURRENT))
    sink.append(table)
    sink.close()
    assert "DELTA_BYTE_ARRAY" in pq.ParquetFile(tmp_path / "u.parquet").metadata.row_group(0).column(0).encodings


@pytest.mark.parametrize("readers", list(ParquetReaders))
def test_values_and_far_timestamps_read_back_as_written(tmp_path, readers):
    table = rows(count=10).set_column(3, "ts", pa.array(
        [dt.datetime(1, 1, 1, tzinfo=UTC), dt.datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)] * 5,
        pa.timestamp("ms", tz="UTC")))
    write(tmp_path / "f.parquet", FileLayout(readers=readers), table)
    back = pq.read_table(tmp_path / "f.parquet", coerce_int96_timestamp_unit="us")
    assert back.column("ts").cast(pa.timestamp("ms", tz="UTC")).equals(table.column("ts"))
    assert back.drop_columns(["ts"]).equals(table.drop_columns(["ts"]))
    # The value checksums compaction and verify --deep take do not depend on the layout.
    other = tmp_path / "other.parquet"
    write(other, FileLayout(readers=next(r for r in ParquetReaders if r is not readers)), table)
    assert file_checksums(LocalFileSystem(), str(tmp_path / "f.parquet"), SCHEMA, HiveFormat.PARQUET) == \
        file_checksums(LocalFileSystem(), str(other), SCHEMA, HiveFormat.PARQUET)


@pytest.mark.parametrize("readers", list(ParquetReaders))
def test_every_column_has_a_page_index_and_statistics(tmp_path, readers):
    metadata = write(tmp_path / "f.parquet", FileLayout(readers=readers), rows())
    for group in range(metadata.num_row_groups):
        for column in range(metadata.num_columns):
            chunk = metadata.row_group(group).column(column)
            assert chunk.has_offset_index, chunk.path_in_schema
            # INT96 has no defined order, so no min and max: no reader would trust them.
            if chunk.physical_type != "INT96":
                assert chunk.has_column_index and chunk.is_stats_set, chunk.path_in_schema


def test_bloom_filters_only_on_the_named_columns_and_duckdb_probes_them(tmp_path):
    path = tmp_path / "f.parquet"
    metadata = write(path, FileLayout(bloom_filter_columns=("event_id", "user_id")), rows())
    with_filter = {metadata.row_group(0).column(i).path_in_schema for i in range(metadata.num_columns)
                   if metadata.row_group(0).column(i).bloom_filter_offset is not None}
    assert with_filter == {"event_id", "user_id"}

    def excluded(column: str, value) -> list[bool]:
        found = duckdb.sql(f"SELECT bloom_filter_excludes FROM parquet_bloom_probe('{path}', '{column}', {value!r}) "
                           f"ORDER BY row_group_id").fetchall()
        return [row[0] for row in found]

    present = rows().column("event_id")[1500].as_py()  # in row group 1
    assert excluded("event_id", present)[1] is False
    assert all(excluded("event_id", 1_000_004))  # not in the file: every row group excluded (1% may not be)
    assert not any(excluded("user_id", "u7")) and all(excluded("user_id", "nobody"))


def test_sorted_row_groups_are_sorted_and_declared_and_keep_every_row(tmp_path):
    table = rows()
    metadata = write(tmp_path / "f.parquet", FileLayout(sort_by=("user_id", "event_id")), table)
    parquet = pq.ParquetFile(tmp_path / "f.parquet")
    for group in range(metadata.num_row_groups):
        declared = metadata.row_group(group).sorting_columns
        assert [(c.column_index, c.descending, c.nulls_first) for c in declared] == [(1, False, False),
                                                                                    (0, False, False)]
        got = parquet.read_row_group(group)
        keys = list(zip(got.column("user_id").to_pylist(), got.column("event_id").to_pylist()))
        assert keys == sorted(keys)
    back = parquet.read()
    assert sorted(back.column("kafka_offset").to_pylist()) == list(range(ROWS))  # lineage: every row once
    # Each row group holds the rows it held unsorted: sorting never moves a row across row groups.
    assert set(parquet.read_row_group(0).column("kafka_offset").to_pylist()) == set(range(1000))


def test_an_unsorted_layout_keeps_the_order_rows_came_in(tmp_path):
    write(tmp_path / "f.parquet", FileLayout(sort_by=("user_id",)).unsorted(), rows())
    assert pq.read_table(tmp_path / "f.parquet").column("kafka_offset").to_pylist() == list(range(ROWS))


def test_the_encodings_shrink_unique_columns(tmp_path):
    """Against pyarrow's default (a dictionary on every column), on the same rows."""
    table = rows(count=20_000)
    ours = tmp_path / "ours.parquet"
    write(ours, FileLayout(), table, row_group_size=20_000)
    pq.write_table(table, tmp_path / "default.parquet", row_group_size=20_000, use_deprecated_int96_timestamps=True)
    assert ours.stat().st_size < (tmp_path / "default.parquet").stat().st_size


def config_text(tmp_path, hive: str, job: str = "") -> str:
    path = tmp_path / "job.ini"
    path.write_text(minimal_ini("warehouse_schema/events.sql", job=job, hive=hive))
    return str(path)


def test_zstd_for_hive_2_3_readers_is_refused_naming_both_keys(tmp_path):
    with pytest.raises(ConfigError, match=r"\[job\] compression: zstd .*\[hive\] parquet_readers = hive-2.3"):
        load_config(config_text(tmp_path, "", job="compression = zstd"))
    config = load_config(config_text(tmp_path, "parquet_readers = current", job="compression = zstd"))
    assert FileLayout.of(config) == FileLayout(Compression.ZSTD, ParquetReaders.CURRENT)


def test_layout_keys_parse_into_the_layout(tmp_path):
    config = load_config(config_text(tmp_path, "bloom_filter_columns = user_id, event_id\nsort_by = user_id"))
    assert FileLayout.of(config) == FileLayout(bloom_filter_columns=("user_id", "event_id"), sort_by=("user_id",))
    with pytest.raises(ConfigError, match=r"\[hive\] sort_by: .*not a column name"):
        load_config(config_text(tmp_path, "sort_by = user id"))


def test_current_readers_get_timestamps_marked_utc_which_spark_reads_as_timestamp(tmp_path):
    """Unmarked INT64 timestamps are TIMESTAMP_NTZ to Spark, which the table's `timestamp` is not."""
    naive = pa.schema([("ts", pa.timestamp("ms"))])
    sink = ParquetSink(LocalFileSystem(), str(tmp_path / "f.parquet"), naive, 10,
                       FileLayout(readers=ParquetReaders.CURRENT))
    sink.append(pa.table({"ts": pa.array([0, 1_700_000_000_000], pa.timestamp("ms"))}))
    sink.close()
    column = pq.ParquetFile(tmp_path / "f.parquet").schema.column(0)
    logical = json.loads(column.logical_type.to_json())
    assert column.physical_type == "INT64" and logical["isAdjustedToUTC"] is True, logical


def test_a_merge_of_files_of_both_layouts_keeps_every_value(tmp_path):
    """A table whose parquet_readers changed holds INT96 and UTC-marked INT64 files: one merge takes both."""
    from etl.compaction.merge import merge_files
    older, newer = tmp_path / "older.parquet", tmp_path / "newer.parquet"
    write(older, FileLayout(), rows(0, 10))
    write(newer, FileLayout(Compression.ZSTD, ParquetReaders.CURRENT), rows(10, 10))
    target = tmp_path / "merged.parquet"
    merged = merge_files(LocalFileSystem(), [str(older), str(newer)], str(target), [(0, 20)], row_group_size=100,
                         layout=FileLayout(Compression.ZSTD, ParquetReaders.CURRENT))
    assert merged == 20
    back = pq.read_table(target)
    assert back.column("kafka_offset").to_pylist() == list(range(20))
    as_micros = back.column("ts").cast(pa.timestamp("us", tz="UTC")).cast(pa.int64()).to_pylist()
    assert as_micros == rows(0, 20).column("ts").cast(pa.timestamp("us", tz="UTC")).cast(pa.int64()).to_pylist()
