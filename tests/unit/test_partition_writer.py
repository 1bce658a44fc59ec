"""PartitionWriter: real Parquet files on the local filesystem, read back with pyarrow."""
from __future__ import annotations

import os
import pickle
from datetime import datetime
from pathlib import Path

import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from etl.config.model import Compression, ParquetReaders
from etl.errors import ConfigError, EtlError, KafkaReadError
from etl.job.partition_writer import PartitionWriter, WriteCounts, WriterSpec
from etl.model.schema import arrow_schema, load_table_schema, rejected_arrow_schema
from etl.rows.decoders import make_decoder
from etl.rows.hive_values import outside_reason
from etl.rows.pipeline import KEY_NOT_UTF8
from etl.sink.fs import LocalFileSystem
from etl.sink.layout import FileLayout
from etl.source.chunk import RawChunk

SCHEMAS = Path(__file__).resolve().parents[2] / "warehouse_schema"
LINEAGE_SQL = "kafka_topic string, kafka_partition int, kafka_offset bigint, kafka_timestamp timestamp"
T0 = 1_501_423_748_123  # 2017-07-30 14:09:08.123 UTC, in ms


def spec_for(schema_path=SCHEMAS / "events.sql", decoder="json", key_column=None, row_group_size=1000,
             compression="snappy") -> WriterSpec:
    schema = load_table_schema(schema_path, key_column)
    readers = ParquetReaders.CURRENT if compression == "zstd" else ParquetReaders.HIVE_2_3
    return WriterSpec(schema, make_decoder(decoder, schema), key_column, row_group_size,
                      FileLayout(Compression(compression), readers))


def keyed_schema(tmp_path: Path, key_type: str) -> Path:
    path = tmp_path / f"keyed_{key_type}.sql"
    path.write_text(f"CREATE TABLE ${{database}}.${{table}} (event_id bigint, msg_key {key_type}, {LINEAGE_SQL}) "
                    "PARTITIONED BY (dt string, hour string) LOCATION '${location}'")
    return path


def event(i: int) -> bytes:
    return b'{"event_id": %d, "user_id": "u%d", "ts": "2017-07-30 14:09:08"}' % (i, i)


def chunk(start: int, count: int, values=None, keys=None) -> RawChunk:
    offsets = list(range(start, start + count))
    return RawChunk(offsets, [T0 + o for o in offsets], keys, values or [event(o) for o in offsets])


def paths(tmp_path: Path) -> tuple[str, str]:
    folder = tmp_path / "dt=2017-07-30" / "hour=14"
    return str(folder / "_tmp.a.events+0+1.parquet"), str(folder / "_tmp.b.events_rejected+0+1.parquet")


def open_writer(tmp_path, spec=None, topic="events", partition=3) -> tuple[PartitionWriter, str, str]:
    main, rejected = paths(tmp_path)
    return PartitionWriter(LocalFileSystem(), spec or spec_for(), topic, partition, main, rejected), main, rejected


def read(path: str) -> pa.Table:
    # INT96 holds nanoseconds of a Julian day; ask for ms so that years past 2262 survive.
    return pq.read_table(path, coerce_int96_timestamp_unit="ms")


def test_rows_have_the_exact_file_schema_and_lineage(tmp_path):
    writer, main, rejected = open_writer(tmp_path)
    with writer:
        writer.write(chunk(100, 3))
        writer.write(chunk(103, 2))
    counts = writer.close()
    table = read(main)
    assert table.schema == arrow_schema(spec_for().schema)
    assert table.num_rows == 5
    assert table.slice(0, 1).to_pylist() == [{
        "event_id": 100, "user_id": "u100", "action": None, "amount": None,
        "ts": datetime(2017, 7, 30, 14, 9, 8), "ok": None,
        "kafka_topic": "events", "kafka_partition": 3, "kafka_offset": 100,
        "kafka_timestamp": datetime(2017, 7, 30, 14, 9, 8, 223000),
    }]
    assert table.column("kafka_offset").to_pylist() == [100, 101, 102, 103, 104]
    assert table.column("event_id").to_pylist() == [100, 101, 102, 103, 104]
    assert not os.path.exists(rejected)
    assert counts == WriteCounts(records=5, rows=5, rejected=0, bytes_written=os.path.getsize(main),
                                 rejected_bytes_written=0, row_groups=1, first_offset=100, last_offset=104)


def test_timestamps_are_int96_and_round_trip(tmp_path):
    writer, main, _ = open_writer(tmp_path)
    values = [b'{"ts": "1965-01-01 00:00:00.001"}', b'{"ts": "3000-12-31 23:59:59.999"}', b'{"ts": "1970-01-01"}']
    with writer:
        writer.write(RawChunk([0, 1, 2], [-1, 0, 32_503_680_000_000], None, values))
    columns = pq.ParquetFile(main).schema
    physical = {columns.column(i).name: columns.column(i).physical_type for i in range(len(columns))}
    assert physical["ts"] == physical["kafka_timestamp"] == "INT96"
    table = read(main)
    assert table.column("ts").to_pylist() == [
        datetime(1965, 1, 1, 0, 0, 0, 1000), datetime(3000, 12, 31, 23, 59, 59, 999000), datetime(1970, 1, 1)
    ]
    # Kafka reports -1 when a record has no timestamp: that is NULL, not 1969-12-31T23:59:59.999.
    assert table.column("kafka_timestamp").to_pylist() == [None, datetime(1970, 1, 1), datetime(3000, 1, 1)]


def test_an_empty_range_still_creates_the_main_file_with_the_full_schema(tmp_path):
    writer, main, rejected = open_writer(tmp_path)
    counts = writer.close()
    table = read(main)
    assert table.num_rows == 0
    assert table.schema == arrow_schema(spec_for().schema)
    assert not os.path.exists(rejected)
    assert (counts.records, counts.rows, counts.rejected, counts.first_offset) == (0, 0, 0, None)


def test_rejected_records_go_to_the_rejected_file_byte_for_byte(tmp_path):
    spec = spec_for(keyed_schema(tmp_path, "binary"), key_column="msg_key")
    writer, main, rejected = open_writer(tmp_path, spec)
    values = [event(10), b'{"event_id": "ten"}', None, event(13), b"\xff\x00garbage"]
    keys = [b"k0", b"k1", None, b"k3", b"\xfe"]
    with writer:
        writer.write(RawChunk([10, 11, 12, 13, 14], [T0] * 5, keys, values))
    counts = writer.close()
    assert (counts.rows, counts.rejected) == (2, 3)
    assert counts.rejected_bytes_written == os.path.getsize(rejected)
    bad = read(rejected)
    assert bad.schema == rejected_arrow_schema()
    assert bad.to_pylist() == [
        {"kafka_topic": "events", "kafka_partition": 3, "kafka_offset": 11,
         "kafka_timestamp": datetime(2017, 7, 30, 14, 9, 8, 123000), "kafka_key": b"k1",
         "raw_value": b'{"event_id": "ten"}', "error": "field 'event_id': expected bigint, got string",
         "kafka_timestamp_ms": T0},
        {"kafka_topic": "events", "kafka_partition": 3, "kafka_offset": 12,
         "kafka_timestamp": datetime(2017, 7, 30, 14, 9, 8, 123000), "kafka_key": None,
         "raw_value": None, "error": "empty message", "kafka_timestamp_ms": T0},
        {"kafka_topic": "events", "kafka_partition": 3, "kafka_offset": 14,
         "kafka_timestamp": datetime(2017, 7, 30, 14, 9, 8, 123000), "kafka_key": b"\xfe",
         "raw_value": b"\xff\x00garbage", "error": "invalid JSON: expected a JSON object",
         "kafka_timestamp_ms": T0},
    ]
    good = read(main)
    assert good.column("kafka_offset").to_pylist() == [10, 13]
    assert good.column("msg_key").to_pylist() == [b"k0", b"k3"]


def test_rejected_records_without_configured_keys_have_null_keys(tmp_path):
    writer, _, rejected = open_writer(tmp_path)
    with writer:
        writer.write(chunk(0, 3, values=[event(0), b"x", event(2)]))
    assert read(rejected).column("kafka_key").to_pylist() == [None]


def test_string_key_column_rejects_keys_that_are_not_utf8(tmp_path):
    spec = spec_for(keyed_schema(tmp_path, "string"), key_column="msg_key")
    writer, main, rejected = open_writer(tmp_path, spec)
    with writer:
        writer.write(chunk(0, 4, keys=[b"caf\xc3\xa9", b"\xc3", None, b"k3"]))
        writer.write(chunk(4, 1, keys=[b"k4"]))
    table = read(main)
    assert table.column("msg_key").to_pylist() == ["caf\u00e9", None, "k3", "k4"]
    assert table.column("event_id").to_pylist() == [0, 2, 3, 4]
    assert read(rejected).select(["kafka_offset", "kafka_key", "error"]).to_pylist() == [
        {"kafka_offset": 1, "kafka_key": b"\xc3", "error": KEY_NOT_UTF8}
    ]


Y242869 = 7_602_051_355_200_000  # 242869-06-01 12:00:00 UTC: a producer bug seen in production
LAST_MS = 253_402_214_399_999  # 9999-12-30 23:59:59.999 UTC, the last timestamp every reader shows


def test_a_kafka_timestamp_hive_cannot_read_back_rejects_the_record_and_keeps_the_raw_ms(tmp_path):
    writer, main, rejected = open_writer(tmp_path)
    values = [event(0), event(1), event(2), event(3), event(4), b"garbage"]
    with writer:
        writer.write(RawChunk([0, 1, 2, 3, 4, 5], [T0, Y242869, LAST_MS, LAST_MS + 1, -1, Y242869], None, values))
    counts = writer.close()
    assert (counts.rows, counts.rejected) == (3, 3)
    good = read(main)
    assert good.column("kafka_offset").to_pylist() == [0, 2, 4]
    assert good.column("kafka_timestamp").to_pylist() == [
        datetime(2017, 7, 30, 14, 9, 8, 123000), datetime(9999, 12, 30, 23, 59, 59, 999000), None]
    outside = ("ms is outside the range Hive and Spark read back (0001-01-02 00:00:00 .. 9999-12-30 23:59:59.999 "
               "UTC); kafka_timestamp_ms keeps it")
    # The rejected table stays readable too: kafka_timestamp is NULL there, the raw value is in kafka_timestamp_ms.
    assert read(rejected).select(["kafka_offset", "kafka_timestamp", "kafka_timestamp_ms", "error"]).to_pylist() == [
        {"kafka_offset": 1, "kafka_timestamp": None, "kafka_timestamp_ms": Y242869,
         "error": f"kafka record timestamp {Y242869} {outside}"},
        {"kafka_offset": 3, "kafka_timestamp": None, "kafka_timestamp_ms": LAST_MS + 1,
         "error": f"kafka record timestamp {LAST_MS + 1} {outside}"},
        {"kafka_offset": 5, "kafka_timestamp": None, "kafka_timestamp_ms": Y242869,
         "error": "invalid JSON: expected a JSON object"},
    ]


def test_a_kafka_timestamp_out_of_range_and_a_bad_key_give_one_rejected_row(tmp_path):
    spec = spec_for(keyed_schema(tmp_path, "string"), key_column="msg_key")
    writer, main, rejected = open_writer(tmp_path, spec)
    with writer:
        writer.write(RawChunk([0, 1, 2], [T0, Y242869, Y242869], [b"k0", b"\xc3", b"k2"], [event(i) for i in range(3)]))
    assert read(main).column("kafka_offset").to_pylist() == [0]
    bad = read(rejected).select(["kafka_offset", "error"]).to_pylist()
    assert [row["kafka_offset"] for row in bad] == [1, 2]
    assert bad[0]["error"] == KEY_NOT_UTF8 and bad[1]["error"].startswith(f"kafka record timestamp {Y242869} ms")


def test_configured_key_column_needs_keys_in_the_chunk(tmp_path):
    spec = spec_for(keyed_schema(tmp_path, "string"), key_column="msg_key")
    writer, main, _ = open_writer(tmp_path, spec)
    with pytest.raises(KafkaReadError, match="key column 'msg_key' is configured but the chunk has no keys"):
        with writer:
            writer.write(chunk(0, 2))
    assert not os.path.exists(main)


def test_access_log_rows(tmp_path):
    writer, main, rejected = open_writer(tmp_path, spec_for(SCHEMAS / "access_log.sql", "access_log"))
    with writer:
        writer.write(chunk(0, 3, values=[b"2017-07-30 14:09:08 ERROR boom\n", b"nope", b"2017-07-30 14:09:09 INFO ok"]))
    assert read(main).select(["log_time", "level", "message", "kafka_offset"]).to_pylist() == [
        {"log_time": datetime(2017, 7, 30, 14, 9, 8), "level": "ERROR", "message": "boom", "kafka_offset": 0},
        {"log_time": datetime(2017, 7, 30, 14, 9, 9), "level": "INFO", "message": "ok", "kafka_offset": 2},
    ]
    assert read(rejected).column("raw_value").to_pylist() == [b"nope"]


def test_row_groups_have_exactly_row_group_size_rows(tmp_path):
    writer, main, _ = open_writer(tmp_path, spec_for(row_group_size=1000))
    with writer:
        for start in range(0, 3500, 300):
            writer.write(chunk(start, min(300, 3500 - start)))
    metadata = pq.ParquetFile(main).metadata
    assert [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)] == [1000, 1000, 1000, 500]
    assert writer.close().row_groups == 4
    assert read(main).column("kafka_offset").to_pylist() == list(range(3500))


@pytest.mark.parametrize("compression, codec", [("snappy", "SNAPPY"), ("zstd", "ZSTD"), ("gzip", "GZIP"),
                                                ("none", "UNCOMPRESSED")])
def test_compression(tmp_path, compression, codec):
    writer, main, _ = open_writer(tmp_path, spec_for(compression=compression))
    with writer:
        writer.write(chunk(0, 10))
    assert pq.ParquetFile(main).metadata.row_group(0).column(0).compression == codec
    assert read(main).num_rows == 10


def test_abort_deletes_both_files(tmp_path):
    writer, main, rejected = open_writer(tmp_path, spec_for(row_group_size=2))
    writer.write(chunk(0, 5, values=[event(0), b"x", event(2), event(3), event(4)]))
    assert os.path.exists(main)
    writer.abort()
    assert not os.path.exists(main) and not os.path.exists(rejected)
    writer.abort()  # again: nothing left to do, and still no error
    with pytest.raises(EtlError, match="was aborted"):
        writer.write(chunk(5, 1))


def test_an_exception_in_the_with_block_aborts_and_propagates(tmp_path):
    writer, main, rejected = open_writer(tmp_path, spec_for(row_group_size=1))
    with pytest.raises(RuntimeError, match="task killed"):
        with writer:
            writer.write(chunk(0, 3, values=[event(0), b"x", event(2)]))
            assert os.path.exists(main)
            raise RuntimeError("task killed")
    assert os.listdir(Path(main).parent) == []


def test_abort_never_raises_over_the_original_error(tmp_path):
    writer, main, _ = open_writer(tmp_path)
    writer.write(chunk(0, 2))
    os.unlink(main)  # someone else cleaned up already
    writer.abort()


def test_abort_after_close_deletes_the_finished_files(tmp_path):
    writer, main, rejected = open_writer(tmp_path)
    writer.write(chunk(0, 2, values=[event(0), b"x"]))
    writer.close()
    assert os.path.exists(main) and os.path.exists(rejected)
    writer.abort()
    assert not os.path.exists(main) and not os.path.exists(rejected)


def test_close_is_idempotent_and_ends_writing(tmp_path):
    writer, _, _ = open_writer(tmp_path)
    writer.write(chunk(0, 2))
    assert writer.close() == writer.close()
    with pytest.raises(EtlError, match="is closed"):
        writer.write(chunk(2, 1))


def test_an_existing_file_is_never_overwritten(tmp_path):
    main, rejected = paths(tmp_path)
    Path(main).parent.mkdir(parents=True)
    Path(main).write_bytes(b"someone else's")
    with pytest.raises(FileExistsError):
        PartitionWriter(LocalFileSystem(), spec_for(), "events", 0, main, rejected)
    assert Path(main).read_bytes() == b"someone else's"


def test_offsets_must_increase_within_and_across_chunks(tmp_path):
    writer, _, _ = open_writer(tmp_path)
    writer.write(chunk(10, 3))
    with pytest.raises(KafkaReadError, match="not strictly increasing after offset 12"):
        writer.write(chunk(12, 2))
    with pytest.raises(KafkaReadError, match="not strictly increasing"):
        writer.write(RawChunk([20, 22, 21], [T0] * 3, None, [event(0)] * 3))
    writer.abort()


def test_chunk_lists_must_align():
    with pytest.raises(KafkaReadError, match="one of each per record"):
        RawChunk([1, 2], [T0], None, [b"a", b"b"])
    with pytest.raises(KafkaReadError, match="one of each per record"):
        RawChunk([1, 2], [T0, T0], [b"k"], [b"a", b"b"])


def test_empty_chunks_are_ignored(tmp_path):
    writer, main, _ = open_writer(tmp_path)
    writer.write(RawChunk([], [], None, []))
    writer.write(chunk(0, 1))
    assert writer.close().records == 1


def test_writer_spec_checks_its_key_column_and_pickles(tmp_path):
    schema = load_table_schema(keyed_schema(tmp_path, "string"), "msg_key")
    with pytest.raises(ConfigError, match="key_column None differs from the schema's 'msg_key'"):
        WriterSpec(schema, make_decoder("json", schema), None, 10, "snappy")
    spec = spec_for()
    assert pickle.loads(pickle.dumps(spec)).schema == spec.schema


def test_memory_stays_bounded_while_streaming_two_million_records(tmp_path):
    """2M records in 10K-record chunks: 20 row groups, and Arrow memory does not grow with size."""
    writer, main, _ = open_writer(tmp_path, spec_for(row_group_size=100_000))
    values = [b'{"event_id":%d,"user_id":"u%d","ok":true}' % (i, i) for i in range(10_000)]
    timestamps = [T0] * 10_000
    samples, resident = [], []
    with writer:
        for start in range(0, 2_000_000, 10_000):
            writer.write(RawChunk(list(range(start, start + 10_000)), timestamps, None, values))
            samples.append(pa.total_allocated_bytes())
            resident.append(psutil.Process().memory_info().rss)
    counts = writer.close()
    assert (counts.rows, counts.row_groups) == (2_000_000, 20)
    metadata = pq.ParquetFile(main).metadata
    assert metadata.num_rows == 2_000_000 and metadata.num_row_groups == 20
    assert {metadata.row_group(i).num_rows for i in range(20)} == {100_000}
    first_half, second_half = max(samples[:100]), max(samples[100:])
    assert second_half <= first_half * 1.25 + (1 << 20), (first_half, second_half)
    # One row group (~100K rows of 7 narrow columns) plus one chunk, with room for Parquet's buffers.
    assert max(samples) < 64 << 20, max(samples)
    # The process as a whole (allocator caches included) levels off after the first row groups.
    assert max(resident[100:]) - max(resident[:100]) < 32 << 20, (max(resident[:100]), max(resident[100:]))


@pytest.mark.parametrize("precision, scale", [(38, 0), (38, 2), (30, 10), (29, 0), (28, 2)])
def test_the_widest_decimals_load_up_to_their_largest_value_and_one_unit_more_is_rejected(
        tmp_path, precision, scale):
    """The check of what a decimal column holds takes the largest value its precision allows,
    exactly: it was rounded to Python's 28 digits, which failed every chunk of a table with a
    decimal wider than that (ArrowInvalid), and named a wrong range."""
    schema_path = tmp_path / "wide.sql"
    schema_path.write_text(f"CREATE TABLE ${{database}}.${{table}} (event_id bigint, "
                           f"amount decimal({precision},{scale}), {LINEAGE_SQL}) "
                           f"PARTITIONED BY (dt string) LOCATION '${{location}}'")
    digits = "9" * (precision - scale) + ("." + "9" * scale if scale else "")
    beyond = "1" + "0" * (precision - scale)
    values = [b'{"event_id": 0, "amount": "12"}', b'{"event_id": 1, "amount": "%s"}' % digits.encode(),
              b'{"event_id": 2, "amount": "-%s"}' % digits.encode(),
              b'{"event_id": 3, "amount": "%s"}' % beyond.encode()]
    schema = load_table_schema(schema_path)
    writer, main, rejected = open_writer(tmp_path, WriterSpec(schema, make_decoder("json", schema), None, 100,
                                                              FileLayout()))
    with writer:
        writer.write(RawChunk([0, 1, 2, 3], [T0] * 4, None, values))
    counts = writer.close()
    assert (counts.rows, counts.rejected) == (3, 1)
    assert [str(v) for v in read(main).column("amount").to_pylist()[1:]] == [digits, "-" + digits]
    [error] = read(rejected).column("error").to_pylist()
    assert "field 'amount'" in error and beyond in error, error  # the decoder's own check, or the range's
    reason = outside_reason("x", pa.decimal128(precision, scale))
    assert reason.endswith(f"which holds -{digits} .. {digits}"), reason
