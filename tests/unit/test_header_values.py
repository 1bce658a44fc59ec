"""[job] header_columns: the key parsed once, checked against the DDL at start-up, and each
chunk's headers copied into their columns by the row pipeline (not the decoder)."""
from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from etl.config import HeaderColumn, load_config
from etl.errors import ConfigError, KafkaReadError
from etl.job.assemble import writer_spec
from etl.job.partition_writer import PartitionWriter
from etl.rows.headers import header_values
from etl.sink.fs import LocalFileSystem
from etl.source.chunk import RawChunk
from tests.harness.config_file import minimal_ini

LINEAGE_SQL = "kafka_topic string, kafka_partition int, kafka_offset bigint, kafka_timestamp timestamp"
TABLE_SQL = ("CREATE TABLE ${{database}}.${{table}} (event_id bigint, trace_id string, raw_trace binary, "
             "amount int, msg_key string, {lineage}) PARTITIONED BY (dt string, hour string) "
             "LOCATION '${{location}}'").format(lineage=LINEAGE_SQL)
T0 = 1_501_423_748_123


def config_of(tmp_path: Path, job_lines: str):
    schema = tmp_path / "headers.sql"
    schema.write_text(TABLE_SQL)
    path = tmp_path / "job.ini"
    path.write_text(minimal_ini(schema, job=job_lines, kafka="topics = events"))
    return load_config(path)


def test_header_columns_parse_into_typed_pairs(tmp_path):
    config = config_of(tmp_path, "header_columns = trace_id:trace_id, app:v1:raw_trace")
    assert config.job.header_columns == (HeaderColumn("trace_id", "trace_id"), HeaderColumn("app:v1", "raw_trace"))
    assert config_of(tmp_path, "").job.header_columns == ()


@pytest.mark.parametrize("value, message", [
    ("trace_id", r"\[job\] header_columns: .*'trace_id' is not header:column \(e.g. trace_id:trace_id\)"),
    (":trace_id", r"\[job\] header_columns: .*':trace_id' is not header:column"),
    ("a:trace_id, b:trace_id", r"\[job\] header_columns: .*column 'trace_id' is filled by two headers"),
    ("a:trace-id", r"\[job\] header_columns: .*'trace-id' is not a column name"),
])
def test_a_bad_header_spec_names_the_key(tmp_path, value, message):
    with pytest.raises(ConfigError, match=message):
        config_of(tmp_path, f"header_columns = {value}")


@pytest.mark.parametrize("value, message", [
    ("t:missing", r"\[job\] header_columns: t:missing: column 'missing' is not declared in .*headers.sql"),
    ("t:amount", r"\[job\] header_columns: t:amount: column 'amount' is int in .*headers.sql; a header column "
                 r"must be string .* or binary"),
    ("t:kafka_topic", r"\[job\] header_columns: t:kafka_topic: 'kafka_topic' is a lineage or the key column"),
    ("t:msg_key", r"\[job\] header_columns: t:msg_key: 'msg_key' is a lineage or the key column"),
])
def test_start_up_refuses_a_column_that_cannot_take_a_header(tmp_path, value, message):
    config = config_of(tmp_path, f"key_column = msg_key\nheader_columns = {value}")
    with pytest.raises(ConfigError, match=message):
        writer_spec(config)


def test_the_last_occurrence_of_a_header_wins_and_a_missing_one_is_null():
    headers = [[("t", b"first"), ("x", b"?"), ("t", b"last")], None, [("x", b"!")], [("t", None)], []]
    assert {name: array.to_pylist() for name, array in header_values(headers, {"t", "u"}).items()} == {
        "t": [b"last", None, None, None, None], "u": [None] * 5}


def open_writer(tmp_path: Path, job_lines: str):
    spec = writer_spec(config_of(tmp_path, job_lines))
    main, rejected = str(tmp_path / "_tmp.main.parquet"), str(tmp_path / "_tmp.rejected.parquet")
    return PartitionWriter(LocalFileSystem(), spec, "events", 0, main, rejected), main, rejected


def test_headers_fill_string_and_binary_columns_and_bad_utf8_is_rejected_naming_the_header(tmp_path):
    writer, main, rejected = open_writer(tmp_path, "header_columns = trace_id:trace_id, trace_id:raw_trace")
    values = [b'{"event_id": %d, "trace_id": "from the value", "raw_trace": "ignored"}' % i for i in range(5)]
    headers = [
        [("trace_id", b"abc"), ("trace_id", b"def")],  # repeated: the last value
        None,  # no headers at all
        [("other", b"x")],  # not this header
        [("trace_id", b"\xff\xfe")],  # not UTF-8: rejected (the binary column could keep it, the string cannot)
        [("trace_id", "é".encode())],
    ]
    with writer:
        writer.write(RawChunk(list(range(5)), [T0] * 5, None, values, headers))
    counts = writer.close()
    assert (counts.rows, counts.rejected) == (4, 1)
    kept = pq.read_table(main, columns=["kafka_offset", "event_id", "trace_id", "raw_trace"]).to_pylist()
    assert kept == [
        {"kafka_offset": 0, "event_id": 0, "trace_id": "def", "raw_trace": b"def"},
        {"kafka_offset": 1, "event_id": 1, "trace_id": None, "raw_trace": None},
        {"kafka_offset": 2, "event_id": 2, "trace_id": None, "raw_trace": None},
        {"kafka_offset": 4, "event_id": 4, "trace_id": "é", "raw_trace": "é".encode()},
    ]
    bad = pq.read_table(rejected, columns=["kafka_offset", "raw_value", "error"]).to_pylist()
    assert bad == [{"kafka_offset": 3, "raw_value": values[3],
                    "error": "kafka header 'trace_id' is not valid UTF-8; declare column trace_id as binary to "
                             "keep such values"}]


def test_a_binary_header_column_keeps_any_bytes(tmp_path):
    writer, main, _ = open_writer(tmp_path, "header_columns = blob:raw_trace")
    with writer:
        writer.write(RawChunk([7, 8], [T0] * 2, None, [b'{"event_id": 1}'] * 2, [[("blob", b"\xff\x00")], []]))
    assert writer.close().rejected == 0
    assert pq.read_table(main, columns=["raw_trace"]).column(0).to_pylist() == [b"\xff\x00", None]


def test_a_reader_that_brings_no_headers_when_they_are_configured_is_a_bug_not_nulls(tmp_path):
    writer, _, _ = open_writer(tmp_path, "header_columns = trace_id:trace_id")
    with pytest.raises(KafkaReadError, match="header_columns are configured but the chunk has no headers"):
        with writer:
            writer.write(RawChunk([0], [T0], None, [b'{"event_id": 1}']))
