"""The file-format seam (etl.sink.file_format) and its ORC writer (etl.sink.orc): the writer a
table's format chooses, footers read the same way for both formats, ORC files whose values read
back as written with timestamps naive (ORC's TIMESTAMP, which Hive 2.3 reads), the codec the
table names, and footer metadata refused rather than dropped."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pyarrow.orc as orc
import pytest

from etl.config.model import Compression, HiveFormat
from etl.errors import WarehouseError
from etl.sink.file_format import footer_rows, open_sink, read_footer
from etl.sink.fs import LocalFileSystem
from etl.sink.layout import FileLayout
from etl.sink.orc import OrcSink
from etl.sink.parquet import ParquetSink

UTC = dt.timezone.utc
SCHEMA = pa.schema([("event_id", pa.int64()), ("user_id", pa.string()), ("amount", pa.decimal128(12, 2)),
                    ("ts", pa.timestamp("ms", tz="UTC")), ("ok", pa.bool_())])
ORC = FileLayout(file_format=HiveFormat.ORC)


def rows(first: int, count: int) -> pa.Table:
    return pa.table({
        "event_id": pa.array(range(first, first + count), pa.int64()),
        "user_id": [None if i % 7 == 0 else f"user-{i % 13}" for i in range(first, first + count)],
        "amount": pa.array([None if i % 5 == 0 else Decimal(i * 3) / 100 for i in range(first, first + count)],
                           pa.decimal128(12, 2)),
        "ts": pa.array([dt.datetime(2026, 11, 29, tzinfo=UTC) + dt.timedelta(seconds=i)
                        for i in range(first, first + count)], pa.timestamp("ms", tz="UTC")),
        "ok": [i % 2 == 0 for i in range(first, first + count)],
    }, schema=SCHEMA)


def write(path, layout: FileLayout, *tables: pa.Table, row_group_size: int = 1000):
    sink = open_sink(LocalFileSystem(), str(path), SCHEMA, row_group_size, layout)
    for table in tables:
        sink.append(table)
    size = sink.close()
    assert size == path.stat().st_size > 0
    return sink


def test_the_table_s_format_chooses_the_writer(tmp_path):
    assert isinstance(open_sink(LocalFileSystem(), str(tmp_path / "a"), SCHEMA, 10, FileLayout()), ParquetSink)
    assert isinstance(open_sink(LocalFileSystem(), str(tmp_path / "b"), SCHEMA, 10, ORC), OrcSink)


@pytest.mark.parametrize("codec, named", [(Compression.SNAPPY, "SNAPPY"), (Compression.ZSTD, "ZSTD"),
                                          (Compression.GZIP, "ZLIB"), (Compression.NONE, "UNCOMPRESSED")])
def test_orc_values_read_back_as_written_with_naive_utc_timestamps_and_the_table_s_codec(tmp_path, codec, named):
    path = tmp_path / "f.orc"
    sink = write(path, FileLayout(compression=codec, file_format=HiveFormat.ORC), rows(0, 1500), rows(1500, 1001))
    assert (sink.rows_appended, sink.row_groups) == (2501, 3)
    found = orc.ORCFile(str(path))
    assert (found.nrows, found.compression) == (2501, named)
    assert found.schema.field("ts").type.tz is None  # ORC's TIMESTAMP, not TIMESTAMP_INSTANT
    back = found.read()
    expected = rows(0, 2501)
    for name in ("event_id", "user_id", "amount", "ok"):
        assert back.column(name).to_pylist() == expected.column(name).to_pylist(), name
    assert back.column("ts").to_pylist() == [t.replace(tzinfo=None) for t in expected.column("ts").to_pylist()]


def test_orc_far_dates_are_written_though_pyarrow_reads_back_only_nanosecond_years(tmp_path):
    """Years 1 and 9999 are written as they are; pyarrow reads ORC timestamps as nanoseconds, so
    it refuses them on read (Spark and Hive read them: ORC's own range is wider)."""
    far = rows(0, 2).set_column(3, "ts", pa.array([dt.datetime(1, 1, 1, tzinfo=UTC),
                                                  dt.datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)],
                                                 pa.timestamp("ms", tz="UTC")))
    path = tmp_path / "far.orc"
    write(path, ORC, far)
    assert orc.ORCFile(str(path)).nrows == 2
    assert orc.ORCFile(str(path)).read(columns=["event_id"]).column(0).to_pylist() == [0, 1]
    with pytest.raises(pa.ArrowInvalid, match="out of range for nanosecond"):
        orc.ORCFile(str(path)).read(columns=["ts"])


def test_an_empty_orc_file_has_the_table_s_columns(tmp_path):
    path = tmp_path / "empty.orc"
    write(path, ORC)
    found = orc.ORCFile(str(path))
    assert found.nrows == 0 and found.schema.names == SCHEMA.names


def test_footer_metadata_on_orc_is_refused_not_dropped(tmp_path):
    sink = open_sink(LocalFileSystem(), str(tmp_path / "m.orc"), SCHEMA, 10, ORC)
    sink.append(rows(0, 3))
    sink.metadata[b"etl.unmatched"] = b"{}"
    with pytest.raises(WarehouseError, match=r"cannot carry the footer metadata \['etl.unmatched'\]"):
        sink.close()
    sink.abort()
    assert not (tmp_path / "m.orc").exists()


@pytest.mark.parametrize("layout", [FileLayout(), ORC], ids=["parquet", "orc"])
def test_footers_are_read_alike_for_both_formats(tmp_path, layout):
    path = tmp_path / "f"
    write(path, layout, rows(0, 42))
    fs = LocalFileSystem()
    assert read_footer(fs, str(path), layout.file_format).rows == 42
    assert footer_rows(fs, str(path), layout.file_format) == 42
    assert footer_rows(fs, str(tmp_path / "missing"), layout.file_format) == 0
