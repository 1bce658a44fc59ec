"""The file-format seam (etl.sink.file_format) and its ORC writer (etl.sink.orc): the writer a
table's format chooses, footers read the same way for both formats, ORC files whose values read
back as written with timestamps naive (ORC's TIMESTAMP, which Hive 2.3 reads), the codec the
table names, and the job's footer metadata kept in ORC's own footer."""
from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest

from etl.config.model import Compression, HiveFormat
from etl.job.partition_writer import PartitionWriter, WriterSpec
from etl.model.schema import load_table_schema
from etl.rows.decoders import make_decoder
from etl.rows.hive_values import largest_decimal
from etl.sink.file_format import footer_rows, open_data, open_sink, read_footer
from etl.sink.fs import LocalFileSystem
from etl.sink.layout import FileLayout
from etl.sink.orc import OrcSink
from etl.sink.parquet import ParquetSink
from etl.source.chunk import RawChunk

UTC = dt.timezone.utc
SCHEMA = pa.schema([("event_id", pa.int64()), ("user_id", pa.string()), ("amount", pa.decimal128(12, 2)),
                    ("ts", pa.timestamp("ms", tz="UTC")), ("ok", pa.bool_())])
ORC = FileLayout(file_format=HiveFormat.ORC)
LINEAGE_SQL = "kafka_topic string, kafka_partition int, kafka_offset bigint, kafka_timestamp timestamp"
T0 = 1_501_423_748_123  # 2017-07-30 14:09:08.123 UTC, in ms
Y2262 = 9_223_372_800_000  # 2262-04-12 00:00:00 UTC: past pyarrow's nanoseconds


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


@pytest.mark.parametrize("compression", list(Compression))
@pytest.mark.parametrize("count", [0, 3, 2500])
def test_footer_metadata_is_kept_in_the_orc_footer_and_the_file_reads_back_whole(tmp_path, compression, count):
    """pyarrow's ORC writer writes no user metadata; the sink adds it to the file's tail
    (etl.sink.orc_tail), for every codec, to an empty file and across row groups."""
    layout = FileLayout(compression=compression, file_format=HiveFormat.ORC)
    path = tmp_path / "m.orc"
    sink = open_sink(LocalFileSystem(), str(path), SCHEMA, 1000, layout)
    if count:
        sink.append(rows(0, count))
    metadata = {b"etl.unmatched": b'{"users": 2}', b"etl.ranges": json.dumps([[0, 1] * 300]).encode()}
    sink.metadata.update(metadata)
    assert sink.close() == path.stat().st_size
    found = orc.ORCFile(str(path))
    assert found.metadata == metadata and found.nrows == count
    read = found.read()  # every stripe, through the footer that was changed
    assert read.schema.names == SCHEMA.names and read.column("event_id").to_pylist() == list(range(count))
    assert read_footer(LocalFileSystem(), str(path), HiveFormat.ORC).metadata == metadata


@pytest.mark.parametrize("layout", [FileLayout(), ORC], ids=["parquet", "orc"])
def test_footers_are_read_alike_for_both_formats(tmp_path, layout):
    path = tmp_path / "f"
    write(path, layout, rows(0, 42))
    fs = LocalFileSystem()
    assert read_footer(fs, str(path), layout.file_format).rows == 42
    assert footer_rows(fs, str(path), layout.file_format) == 42
    assert footer_rows(fs, str(tmp_path / "missing"), layout.file_format) == 0


def test_values_an_orc_table_cannot_read_back_are_rejected_with_the_range_and_the_rest_reads_back(tmp_path):
    """pyarrow reads ORC timestamps only in its nanosecond range, and Spark shows dates before
    1582-10-15 shifted (etl.rows.hive_values): an ORC table rejects them, with the range it
    reads back, where a Parquet table keeps them; everything kept reads back through pyarrow."""
    schema_path = tmp_path / "far.sql"
    schema_path.write_text(f"CREATE TABLE ${{database}}.${{table}} (event_id bigint, ts timestamp, day date, "
                           f"{LINEAGE_SQL}) PARTITIONED BY (dt string) LOCATION '${{location}}'")
    values = [("0001-01-02 00:00:00", "2026-11-29"), ("1677-09-22 00:00:00", "1582-10-15"),
              ("2262-04-10 23:59:59", "9999-12-31"), ("2262-04-12 00:00:00", "2026-11-29"),
              ("9999-12-30 00:00:00", "2026-11-29"), ("2026-11-29 00:00:00", "1582-10-14"),
              ("2026-11-29 00:00:00", "2026-11-29")]
    records = [json.dumps({"event_id": i, "ts": ts, "day": day}).encode() for i, (ts, day) in enumerate(values)]
    kept = {}
    for name, layout in [("parquet", FileLayout()), ("orc", ORC)]:
        schema = load_table_schema(schema_path)
        spec = WriterSpec(schema, make_decoder("json", schema), None, 100, layout)
        main, rejected = str(tmp_path / f"{name}.main"), str(tmp_path / f"{name}.rejected")
        with PartitionWriter(LocalFileSystem(), spec, "events", 0, main, rejected) as writer:
            writer.write(RawChunk(list(range(7)), [T0] * 6 + [Y2262], None, records))
            counts = writer.close()
        kept[name] = (counts.rows, counts.rejected)
        if name == "orc":
            assert orc.ORCFile(main).read().column("event_id").to_pylist() == [1, 2]  # all of it reads back
            errors = pq.read_table(rejected).select(["kafka_offset", "error"]).to_pylist()
            orc_range = "is outside the range every reader of an ORC table read back"
            assert [row["kafka_offset"] for row in errors] == [0, 3, 4, 5, 6]
            assert all(orc_range in row["error"] for row in errors), errors
            assert "(1677-09-22 00:00:00 .. 2262-04-10 23:59:59.999 UTC)" in errors[0]["error"]
            assert "column 'day': 1582-10-14" in errors[3]["error"]
            assert "(1582-10-15 .. 9999-12-31)" in errors[3]["error"]
            assert errors[4]["error"].startswith(f"kafka record timestamp {Y2262} ms")
    assert kept == {"parquet": (7, 0), "orc": (2, 5)}


def test_the_widest_decimals_both_ways_read_back_exactly_from_orc(tmp_path):
    """decimal(38,2) and decimal(10,2) at their largest, both signs (Spark's ORC reader read the same
    file back exactly too, by hand on 2026-11-29)."""
    wide, narrow = pa.decimal128(38, 2), pa.decimal128(10, 2)
    big, small = largest_decimal(wide), largest_decimal(narrow)
    schema = pa.schema([("wide", wide), ("narrow", narrow)])
    table = pa.table({"wide": pa.array([big, big.copy_negate(), None], wide),
                      "narrow": pa.array([small, small.copy_negate(), None], narrow)}, schema=schema)
    sink = open_sink(LocalFileSystem(), str(tmp_path / "d.orc"), schema, 10, ORC)
    sink.append(table)
    sink.close()
    with open_data(LocalFileSystem(), str(tmp_path / "d.orc"), HiveFormat.ORC) as data:
        assert pa.concat_tables(list(data.tables())).to_pylist() == table.to_pylist()
