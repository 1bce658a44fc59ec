"""The JSON and access_log decoders, against real pyarrow."""
from __future__ import annotations

import json
import pickle
import random
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from etl.errors import ConfigError, SchemaError
from etl.model.schema import data_arrow_schema, load_table_schema
from etl.rows.decoders import EMPTY_MESSAGE, Decoded, arange, invalid_utf8_positions, make_decoder

SCHEMAS = Path(__file__).resolve().parents[2] / "warehouse_schema"
LINEAGE_SQL = "kafka_topic string, kafka_partition int, kafka_offset bigint, kafka_timestamp timestamp"


@pytest.fixture(scope="module")
def events_decoder():
    return make_decoder("json", load_table_schema(SCHEMAS / "events.sql"))


@pytest.fixture(scope="module")
def access_log_decoder():
    return make_decoder("access_log", load_table_schema(SCHEMAS / "access_log.sql"))


@pytest.fixture()
def typed_decoder(tmp_path):
    """A JSON decoder over every column type the schema supports."""
    path = tmp_path / "typed.sql"
    path.write_text(
        "CREATE TABLE ${database}.${table} (tiny tinyint, price decimal(10,2), day date, blob binary, "
        f"f float, label varchar(10), {LINEAGE_SQL}) PARTITIONED BY (dt string, hour string) "
        "LOCATION '${location}'"
    )
    return make_decoder("json", load_table_schema(path))


def event(i: int, **overrides) -> bytes:
    record = {"event_id": i, "user_id": f"u{i}", "action": "buy", "amount": i / 4, "ts": "2017-07-30 14:09:08",
              "ok": i % 2 == 0}
    record.update(overrides)
    return json.dumps(record).encode()


def assert_consistent(decoded: Decoded, n: int) -> None:
    """Every input index is either a row or an error, exactly once, in order."""
    good = decoded.good.to_pylist()
    bad = [index for index, _reason in decoded.errors]
    assert good == sorted(good) and bad == sorted(bad)
    assert sorted(good + bad) == list(range(n))
    assert decoded.table.num_rows == len(good)


def reasons(decoded: Decoded) -> dict[int, str]:
    return dict(decoded.errors)


# --- JSON --------------------------------------------------------------------------------


def test_clean_chunk_takes_the_fast_path(events_decoder):
    values = [event(i) for i in range(1000)]
    decoded = events_decoder.decode(values)
    assert_consistent(decoded, 1000)
    assert decoded.errors == []
    assert decoded.good.to_pylist() == list(range(1000))
    assert decoded.table.schema == data_arrow_schema(events_decoder.schema)
    assert decoded.table.slice(3, 1).to_pylist() == [
        {"event_id": 3, "user_id": "u3", "action": "buy", "amount": 0.75,
         "ts": datetime(2017, 7, 30, 14, 9, 8), "ok": False}
    ]


def test_missing_fields_are_null_and_unknown_fields_ignored(events_decoder):
    decoded = events_decoder.decode([b'{"event_id": 7, "extra": {"nested": [1, {"x": null}]}, "more": "s"}',
                                     b'{"extra": 5}', b"{}"])
    assert decoded.errors == []
    rows = decoded.table.to_pylist()
    assert rows[0] == {"event_id": 7, "user_id": None, "action": None, "amount": None, "ts": None, "ok": None}
    assert rows[1] == rows[2] == dict.fromkeys(rows[0])


def test_malformed_records_among_10000_good_ones_are_isolated_exactly(events_decoder):
    rng = random.Random(42)
    values = [event(i) for i in range(10_000)]
    broken = sorted(rng.sample(range(10_000), 60))
    breakers = [
        lambda i: event(i)[:-3],  # truncated
        lambda i: event(i, event_id=str(i)),  # string for a bigint: a parse error naming the field
        lambda i: event(i, event_id=i + 0.5),  # a conversion error, which names no row
        lambda i: event(i, ts="yesterday"),  # a timestamp that does not parse
        lambda i: b"not json at all",
        lambda i: event(i) + event(i),  # two objects in one message
    ]
    for n, i in enumerate(broken):
        values[i] = breakers[n % len(breakers)](i)
    decoded = events_decoder.decode(values)
    assert_consistent(decoded, 10_000)
    assert [index for index, _reason in decoded.errors] == broken
    # Rows stay aligned with their records: each row's event_id is its input index.
    assert decoded.table.column("event_id").to_pylist() == decoded.good.to_pylist()
    assert decoded.table.column("user_id").to_pylist() == [f"u{i}" for i in decoded.good.to_pylist()]


@pytest.mark.parametrize("seed", range(5))
def test_every_kind_of_bad_record_mixed_at_random_keeps_rows_aligned(events_decoder, seed):
    rng = random.Random(seed)
    good_variants = [
        lambda i: event(i),
        lambda i: json.dumps({"event_id": i, "user_id": f"u{i}"}, indent=1).encode(),  # newlines between tokens
        lambda i: b"  " + event(i, ts="2017-07-30T14:09:08+01:00") + b"\r\n",
        lambda i: event(i, amount=3, extra=[1, {"a": None}]),
    ]
    bad_variants = [
        lambda i: event(i)[:-2], lambda i: b"null", lambda i: b"[]", lambda i: None, lambda i: b"",
        lambda i: event(i, event_id=f"{i}"), lambda i: event(i, event_id=i + 0.25),
        lambda i: event(i).replace(b'"event_id": %d' % i, b'"event_id": 1.0'),  # bisection only
        lambda i: event(i, ts="later"), lambda i: event(i, ts="2017-07-30T14:09:08+25:00"),
        lambda i: event(i).replace(b'"u%d"' % i, b'"\xff"'), lambda i: event(i) + b"{}",
    ]
    n = 3000
    bad = set(rng.sample(range(n), rng.randrange(1, 300)))
    values = [rng.choice(bad_variants)(i) if i in bad else rng.choice(good_variants)(i) for i in range(n)]
    decoded = events_decoder.decode(values)
    assert_consistent(decoded, n)
    assert [index for index, _reason in decoded.errors] == sorted(bad)
    assert decoded.table.column("event_id").to_pylist() == decoded.good.to_pylist()


def test_many_bad_records_do_not_exhaust_the_stack(events_decoder):
    values = [event(i) if i % 2 else b'{"event_id": ' for i in range(10_000)]
    decoded = events_decoder.decode(values)
    assert_consistent(decoded, 10_000)
    assert len(decoded.errors) == 5000
    assert decoded.table.column("event_id").to_pylist() == list(range(1, 10_000, 2))


def test_reasons_say_what_is_wrong(events_decoder):
    values = [
        b'{"event_id": 1',
        b'{"event_id": "1"}',
        b'{"event_id": 1.5}',
        b'{"amount": "cheap"}',
        b'{"ok": 1}',
        b'{"user_id": 42}',
        b'{"user_id": {"a": 1}}',
        b'{"event_id": 1, "event_id": 2}',
        b'{"event_id": 1} {"event_id": 2}',
        b'{"ts": "yesterday"}',
        b'{"ts": 1501423748000}',
    ]
    assert list(reasons(events_decoder.decode(values)).values()) == [
        "invalid JSON: Missing a comma or '}' after an object member.",
        "field 'event_id': expected bigint, got string",
        "field 'event_id': cannot read '1.5' as bigint",
        "field 'amount': expected double, got string",
        "field 'ok': expected boolean, got number",
        "field 'user_id': expected string, got number",
        "field 'user_id': expected string, got object",
        "field 'event_id' appears more than once",
        "message holds 2 JSON values; expected exactly one object",
        "field 'ts': cannot read 'yesterday' as timestamp",
        "field 'ts': expected timestamp, got number",
    ]


@pytest.mark.parametrize("value, kind", [(b"[1,2]", "array"), (b"42", "number"), (b"-1", "number"),
                                         (b'"s"', "string"), (b"null", "null"), (b" true", "boolean")])
def test_json_that_is_not_an_object_is_rejected(events_decoder, value, kind):
    # null first in a block would crash pyarrow's reader, and null later would read as an all-NULL row.
    decoded = events_decoder.decode([value, event(1), value, event(3)])
    assert decoded.errors == [(0, f"expected a JSON object, got {kind}"), (2, f"expected a JSON object, got {kind}")]
    assert decoded.table.column("event_id").to_pylist() == [1, 3]


@pytest.mark.parametrize("value", [b"not json", b"nullx", b"true false", b"42abc", b"[1,", b"NaN", b"\xff\x00garbage"])
def test_bytes_that_are_no_json_value_are_invalid_json_not_another_kind(events_decoder, value):
    # `not json` starts like null, `42abc` like a number: neither is one.
    decoded = events_decoder.decode([event(0), value])
    assert decoded.errors == [(1, "invalid JSON: expected a JSON object")]


def test_an_object_after_a_utf8_byte_order_mark_is_read_as_without_it(events_decoder):
    # RFC 8259 section 8.1 lets a parser ignore a BOM; producers on Windows (.NET's UTF8 encoding,
    # PowerShell) write one. Only the object is read: the rejected table would keep the raw bytes.
    bom = b"\xef\xbb\xbf"
    decoded = events_decoder.decode([bom + event(0), event(1), bom + b' {"event_id": 2}', bom + b"[1]",
                                     bom + bom + b"{}"])
    assert decoded.good.to_pylist() == [0, 1, 2]
    assert decoded.table.column("event_id").to_pylist() == [0, 1, 2]
    assert decoded.errors == [(3, "expected a JSON object, got array"), (4, "invalid JSON: expected a JSON object")]


@pytest.mark.parametrize("empty", [None, b"", b"  \r\n"])
def test_empty_messages_are_rejected(events_decoder, empty):
    decoded = events_decoder.decode([event(0), empty, event(2)])
    assert decoded.errors == [(1, EMPTY_MESSAGE)]
    assert decoded.good.to_pylist() == [0, 2]


def test_numbers_widen_but_do_not_narrow(events_decoder, typed_decoder):
    decoded = events_decoder.decode([b'{"amount": 3}', b'{"amount": -2.5e3}'])
    assert decoded.table.column("amount").to_pylist() == [3.0, -2500.0]
    decoded = typed_decoder.decode([b'{"tiny": 127, "f": 1}', b'{"tiny": 128}', b'{"tiny": 1.0}'])
    assert decoded.table.to_pylist()[0]["tiny"] == 127 and decoded.table.to_pylist()[0]["f"] == 1.0
    assert reasons(decoded) == {1: "field 'tiny': cannot read '128' as tinyint",
                                2: "field 'tiny': cannot read '1.0' as tinyint"}


def test_integer_conversion_failures_keep_big_integers_exact(events_decoder):
    values = [b'{"event_id": 9223372036854775807}', b'{"event_id": 1.5}', b'{"event_id": -9223372036854775808}',
              b'{"event_id": 9223372036854775808}', b'{"event_id": 1e3}', b'{"event_id": 1.0}',
              b'{"event_id": 12345678901234567}', b'{"event_id": 1e400}']
    decoded = events_decoder.decode(values)
    assert decoded.table.column("event_id").to_pylist() == [2**63 - 1, -2**63, 12345678901234567]
    assert reasons(decoded) == {
        1: "field 'event_id': cannot read '1.5' as bigint",
        3: "field 'event_id': cannot read '9223372036854775808' as bigint",
        4: "field 'event_id': cannot read '1e3' as bigint",
        5: "field 'event_id': cannot read '1.0' as bigint",
        7: "invalid JSON: Number too big to be stored in double.",
    }


def test_decimal_date_binary_and_varchar_columns(typed_decoder):
    decoded = typed_decoder.decode([
        b'{"price": "12.34", "day": "2017-07-30", "blob": "raw", "label": "x"}',
        b'{"price": 1.5}',
        b'{"price": 1.234}',
        b'{"day": "2017-02-30"}',
        b'{"day": 17377}',
    ])
    assert decoded.table.slice(0, 2).to_pylist() == [
        {"tiny": None, "price": Decimal("12.34"), "day": date(2017, 7, 30), "blob": b"raw", "f": None, "label": "x"},
        {"tiny": None, "price": Decimal("1.50"), "day": None, "blob": None, "f": None, "label": None},
    ]
    assert reasons(decoded) == {
        2: "field 'price': expected decimal(10,2): 1.234 requires scale 3",
        3: "field 'day': cannot read '2017-02-30' as date",
        4: "field 'day': expected date, got number",
    }


@pytest.mark.parametrize("text, expected", [
    ("2017-07-30 14:09:08", datetime(2017, 7, 30, 14, 9, 8)),
    ("2017-07-30 14:09:08.123", datetime(2017, 7, 30, 14, 9, 8, 123000)),
    ("2017-07-30T14:09:08", datetime(2017, 7, 30, 14, 9, 8)),
    ("2017-07-30T14:09:08.123456", datetime(2017, 7, 30, 14, 9, 8, 123000)),  # sub-ms truncated
    ("2017-07-30T14:09:08Z", datetime(2017, 7, 30, 14, 9, 8)),
    ("2017-07-30T14:09:08.5+02:00", datetime(2017, 7, 30, 12, 9, 8, 500000)),  # zoned: stored in UTC
    ("2017-07-30T14:09:08-0130", datetime(2017, 7, 30, 15, 39, 8)),
    ("2017-07-30", datetime(2017, 7, 30)),
    ("1965-01-01 00:00:00", datetime(1965, 1, 1)),
    ("1969-12-31 23:59:59.998499", datetime(1969, 12, 31, 23, 59, 59, 998000)),  # floored, not rounded up
    ("3000-01-01 00:00:00", datetime(3000, 1, 1)),
])
def test_timestamps(events_decoder, text, expected):
    decoded = events_decoder.decode([json.dumps({"ts": text}).encode()])
    assert decoded.errors == []
    assert decoded.table.column("ts").to_pylist() == [expected]


@pytest.mark.parametrize("text", ["30.07.2017", "2017-07-30 25:00:00", "2017-02-30 00:00:00",
                                  "2017-07-30T14:09:08.123456789", "", "now"])
def test_timestamps_that_do_not_parse_are_rejected(events_decoder, text):
    decoded = events_decoder.decode([event(0), json.dumps({"ts": text}).encode(), event(2)])
    assert reasons(decoded) == {1: f"field 'ts': cannot read {text!r} as timestamp"}
    assert decoded.table.column("event_id").to_pylist() == [0, 2]


def test_zoned_and_naive_timestamps_mix_in_one_chunk(events_decoder):
    texts = ["2017-07-30T14:09:08Z", "2017-07-30 14:09:08", "bad", "2017-07-30T16:09:08+02:00", "2017-07-30T14:09:08"]
    decoded = events_decoder.decode([json.dumps({"event_id": i, "ts": t}).encode() for i, t in enumerate(texts)])
    assert reasons(decoded) == {2: "field 'ts': cannot read 'bad' as timestamp"}
    assert decoded.table.column("ts").to_pylist() == [datetime(2017, 7, 30, 14, 9, 8)] * 4
    assert decoded.table.column("event_id").to_pylist() == [0, 1, 3, 4]


def test_a_timestamp_that_is_not_utf8(events_decoder):
    decoded = events_decoder.decode([event(0), b'{"ts": "2017-07-30 \xff"}'])
    assert reasons(decoded) == {1: "field 'ts': invalid UTF-8"}


def test_one_record_failing_in_two_fields_is_rejected_once(events_decoder):
    decoded = events_decoder.decode([event(0), b'{"user_id": "\xc3", "ts": "never"}', event(2)])
    assert reasons(decoded) == {1: "field 'user_id': invalid UTF-8"}
    assert decoded.table.column("event_id").to_pylist() == [0, 2]


def test_newlines_between_tokens_are_whitespace(events_decoder):
    pretty = json.dumps({"event_id": 1, "user_id": "u1"}, indent=2).encode()
    values = [event(0), pretty, b'{\r\n"event_id": 2}\r\n', event(3)]
    decoded = events_decoder.decode(values)
    assert decoded.errors == []
    assert decoded.table.column("event_id").to_pylist() == [0, 1, 2, 3]


def test_a_raw_newline_inside_a_string_stays_invalid(events_decoder):
    decoded = events_decoder.decode([event(0), b'{"event_id": 1, "user_id": "a\nb"}', event(2)])
    assert [index for index, _reason in decoded.errors] == [1]
    assert decoded.errors[0][1].startswith("invalid JSON: Invalid encoding in string")
    assert decoded.table.column("event_id").to_pylist() == [0, 2]


def test_an_unterminated_record_does_not_swallow_the_next_one(events_decoder):
    decoded = events_decoder.decode([event(0), b'{"event_id":', event(2), event(3)])
    assert [index for index, _reason in decoded.errors] == [1]
    assert decoded.errors[0][1].startswith("invalid JSON:")
    assert decoded.table.column("event_id").to_pylist() == [0, 2, 3]


def test_invalid_utf8_in_a_string_field_is_rejected(events_decoder, typed_decoder):
    decoded = events_decoder.decode([event(0), b'{"user_id": "caf\xc3"}', b'{"user_id": "caf\xc3\xa9"}'])
    assert reasons(decoded) == {1: "field 'user_id': invalid UTF-8"}
    assert decoded.table.column("user_id").to_pylist() == ["u0", "caf\u00e9"]
    # A binary column keeps whatever bytes the string held.
    assert typed_decoder.decode([b'{"blob": "\xff\xfe"}']).table.column("blob").to_pylist() == [b"\xff\xfe"]


def test_empty_input_and_all_bad_input_give_empty_tables(events_decoder):
    for values in ([], [b"x", None]):
        decoded = events_decoder.decode(values)
        assert_consistent(decoded, len(values))
        assert decoded.table.schema == data_arrow_schema(events_decoder.schema)
        assert decoded.table.num_rows == 0


def test_key_column_is_not_read_from_the_json(tmp_path):
    path = tmp_path / "k.sql"
    path.write_text(f"CREATE TABLE ${{database}}.${{table}} (a string, k string, {LINEAGE_SQL}) "
                    "PARTITIONED BY (dt string, hour string) LOCATION '${location}'")
    decoder = make_decoder("json", load_table_schema(path, key_column="k"))
    assert decoder.decode([b'{"a": "x", "k": 5}']).table.to_pylist() == [{"a": "x"}]


def test_decoders_pickle(events_decoder, access_log_decoder):
    for decoder, value in [(events_decoder, event(1)), (access_log_decoder, b"2017-07-30 14:09:08 INFO hi")]:
        clone = pickle.loads(pickle.dumps(decoder))
        assert clone.decode([value, b"x"]).table == decoder.decode([value, b"x"]).table


def test_unknown_decoder():
    with pytest.raises(ConfigError, match="unknown decoder 'xml'; set .* to one of json, access_log"):
        make_decoder("xml", load_table_schema(SCHEMAS / "events.sql"))


# --- access_log --------------------------------------------------------------------------


def test_access_log_lines(access_log_decoder):
    decoded = access_log_decoder.decode([
        b"2017-07-30 14:09:08 ERROR some message",
        b"2017-07-30 14:09:09 INFO  padded by %-5p\n",
        b"2017-07-30 14:09:10 WARN a stack trace\n  at line 1\r\n",
        b"2017-07-30 14:09:11 DEBUG",
        "2017-07-30 14:09:12 INFO caf\u00e9 \u2603".encode(),
    ])
    assert decoded.errors == []
    assert decoded.table.schema == data_arrow_schema(access_log_decoder.schema)
    assert decoded.table.to_pylist() == [
        {"log_time": datetime(2017, 7, 30, 14, 9, 8), "level": "ERROR", "message": "some message"},
        {"log_time": datetime(2017, 7, 30, 14, 9, 9), "level": "INFO", "message": "padded by %-5p"},
        {"log_time": datetime(2017, 7, 30, 14, 9, 10), "level": "WARN", "message": "a stack trace\n  at line 1"},
        {"log_time": datetime(2017, 7, 30, 14, 9, 11), "level": "DEBUG", "message": ""},
        {"log_time": datetime(2017, 7, 30, 14, 9, 12), "level": "INFO", "message": "caf\u00e9 \u2603"},
    ]


def test_access_log_bad_lines(access_log_decoder):
    values = [
        b"2017-07-30 14:09:08 ERROR ok",
        b"garbage",
        None,
        b"",
        b"2017-07-30 14:09:08 error lower-case level",
        b"2017-07-30T14:09:08 ERROR iso separator",
        b"2017-02-30 14:09:08 ERROR no such day",
        b"2017-07-30 14:09:08 ERROR caf\xc3",
        b"2017-07-30 14:09:08 ERROR ok again",
    ]
    decoded = access_log_decoder.decode(values)
    assert_consistent(decoded, len(values))
    mismatch = "line does not match '<date> <time> <LEVEL> <message>'"
    assert reasons(decoded) == {
        1: mismatch, 2: EMPTY_MESSAGE, 3: EMPTY_MESSAGE, 4: mismatch, 5: mismatch,
        6: "invalid date or time '2017-02-30 14:09:08'",
        7: "message is not valid UTF-8",
    }
    assert decoded.table.column("message").to_pylist() == ["ok", "ok again"]


def test_access_log_alignment_over_a_large_chunk(access_log_decoder):
    values = [b"2017-07-30 14:09:08 INFO %d" % i if i % 97 else b"\xff%d" % i for i in range(20_000)]
    decoded = access_log_decoder.decode(values)
    assert_consistent(decoded, 20_000)
    assert [index for index, _reason in decoded.errors] == list(range(0, 20_000, 97))
    assert decoded.table.column("message").to_pylist() == [str(i) for i in decoded.good.to_pylist()]


def test_access_log_needs_exactly_its_columns(tmp_path):
    path = tmp_path / "a.sql"
    path.write_text(f"CREATE TABLE ${{database}}.${{table}} (log_time timestamp, level string, "
                    f"message string, host string, {LINEAGE_SQL}) "
                    "PARTITIONED BY (dt string, hour string) LOCATION '${location}'")
    with pytest.raises(SchemaError, match="access_log decoder fills exactly .* host string"):
        make_decoder("access_log", load_table_schema(path))
    with pytest.raises(SchemaError, match="access_log decoder"):
        make_decoder("access_log", load_table_schema(SCHEMAS / "events.sql"))


def test_access_log_output_follows_the_ddl_column_order(tmp_path):
    path = tmp_path / "a.sql"
    path.write_text(f"CREATE TABLE ${{database}}.${{table}} (message varchar(200), {LINEAGE_SQL}, "
                    "level string, log_time timestamp) "
                    "PARTITIONED BY (dt string, hour string) LOCATION '${location}'")
    decoder = make_decoder("access_log", load_table_schema(path))
    decoded = decoder.decode([b"2017-07-30 14:09:08 INFO hi"])
    assert decoded.table.column_names == ["message", "level", "log_time"]


# --- helpers -----------------------------------------------------------------------------


def test_arange_and_invalid_utf8_positions():
    assert arange(0).to_pylist() == [] and arange(4).to_pylist() == [0, 1, 2, 3]
    values = pa.array([b"a", b"\xff", None, b"ok", b"\xc3", b"\xc3\xa9"], pa.binary())
    assert invalid_utf8_positions(values) == [1, 4]
    assert invalid_utf8_positions(pa.array([], pa.binary())) == []


# --- values Hive or Spark cannot read back ---------------------------------------
TS_RANGE = "0001-01-02 00:00:00 .. 9999-12-30 23:59:59.999 UTC"
DATE_RANGE = "0001-01-01 .. 9999-12-31"


@pytest.fixture()
def ranged_decoder(tmp_path):
    """A JSON decoder over the column types whose values can fall outside what Hive reads back."""
    path = tmp_path / "ranged.sql"
    path.write_text(
        "CREATE TABLE ${database}.${table} (id int, ts timestamp, day date, price decimal(10,2), f float, "
        f"d double, {LINEAGE_SQL}) PARTITIONED BY (dt string, hour string) LOCATION '${{location}}'"
    )
    return make_decoder("json", load_table_schema(path))


def test_timestamps_outside_what_hive_and_spark_read_back_are_rejected(ranged_decoder):
    texts = ["2017-07-30 14:09:08", "0000-06-01 00:00:00", "0001-01-01 23:59:59.999", "0001-01-02 00:00:00",
             "9999-12-30 23:59:59.999", "9999-12-31 00:00:00", "9999-12-30T23:00:00-05:00", "2017-07-30T14:09:08Z"]
    decoded = ranged_decoder.decode([json.dumps({"id": i, "ts": t}).encode() for i, t in enumerate(texts)])
    assert_consistent(decoded, len(texts))
    assert reasons(decoded) == {
        i: f"field 'ts': {texts[i]!r} is outside the range Hive and Spark read back ({TS_RANGE})" for i in (1, 2, 5, 6)
    }
    assert decoded.table.column("id").to_pylist() == [0, 3, 4, 7]
    assert decoded.table.column("ts").to_pylist()[1:3] == [datetime(1, 1, 2),
                                                            datetime(9999, 12, 30, 23, 59, 59, 999000)]


def test_dates_outside_what_hive_and_spark_read_back_are_rejected(ranged_decoder):
    texts = ["0000-12-31", "0001-01-01", "2017-07-30", "9999-12-31"]
    decoded = ranged_decoder.decode([json.dumps({"id": i, "day": t}).encode() for i, t in enumerate(texts)])
    assert reasons(decoded) == {0: f"field 'day': '0000-12-31' is outside the range Hive and Spark read back "
                                   f"({DATE_RANGE})"}
    assert decoded.table.column("day").to_pylist() == [date(1, 1, 1), date(2017, 7, 30), date(9999, 12, 31)]


def test_decimals_that_do_not_fit_their_precision_are_rejected(ranged_decoder):
    # pyarrow's reader checks the digits as written, not after scaling: 123456789 (9 digits) passed
    # into decimal(10,2), and Parquet silently stored 123456789.00 as another number.
    values = [b'{"id": 0, "price": 99999999.99}', b'{"id": 1, "price": 123456789.5}', b'{"id": 2, "price": -1e8}',
              b'{"id": 3, "price": "-99999999.99"}', b'{"id": 4, "price": 1e40}', b'{"id": 5, "price": 123456789}',
              b'{"id": 6, "price": 123456789.12}']
    decoded = ranged_decoder.decode(values)
    assert_consistent(decoded, len(values))
    holds = "does not fit decimal(10,2), which holds -99999999.99 .. 99999999.99"
    assert reasons(decoded) == {
        1: f"field 'price': 123456789.50 {holds}",
        2: f"field 'price': -100000000.00 {holds}",
        4: "field 'price': expected decimal(10,2): The string '1e40' cannot be represented as decimal128",
        5: f"field 'price': 123456789.00 {holds}",
        6: "field 'price': expected decimal(10,2): 123456789.12 requires precision 11",
    }
    assert decoded.table.column("price").to_pylist() == [Decimal("99999999.99"), Decimal("-99999999.99")]


def test_numbers_that_overflow_a_float_column_are_rejected(ranged_decoder):
    values = [b'{"id": 0, "f": 1e39}', b'{"id": 1, "f": 3.4028235e38}', b'{"id": 2, "f": -1e39}',
              b'{"id": 3, "f": 1e-50}', b'{"id": 4, "f": 1.5, "d": 1e300}', b'{"id": 5, "f": null}']
    decoded = ranged_decoder.decode(values)
    assert_consistent(decoded, len(values))
    too_large = "is too large for float (largest magnitude 3.4028235e+38); declare the column as double"
    assert reasons(decoded) == {0: f"field 'f': 1e+39 {too_large}", 2: f"field 'f': -1e+39 {too_large}"}
    assert decoded.table.column("id").to_pylist() == [1, 3, 4, 5]
    assert decoded.table.column("f").to_pylist() == [pytest.approx(3.4028235e38), 0.0, 1.5, None]
    assert decoded.table.column("d").to_pylist() == [None, None, 1e300, None]


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "-NaN", "Inf", "-Inf"])
def test_nan_and_infinity_literals_are_not_json_and_are_rejected(ranged_decoder, literal):
    values = [
        f'{{"id": 0, "d": {literal}}}'.encode(),
        f'{{"id": 1, "f": {literal}, "d": 1.5}}'.encode(),
        f'{{"id": 2, "unknown": [1,\r\n {literal}]}}'.encode(),
        b'{"id": 3, "d": 2.5, "note": "NaN, Infinity and Inf inside a string are text: [1, NaN]"}',
        f'{{"id": 4, "s": "a \\" quote", "d":{literal}}}'.encode(),
        b'{"id": 5, "d": -0.0}',
    ]
    decoded = ranged_decoder.decode(values)
    assert_consistent(decoded, len(values))
    not_json = f"{literal} is not valid JSON (JSON has no NaN or Infinity); send null"
    assert reasons(decoded) == {0: f"field 'd': {not_json}", 1: f"field 'f': {not_json}",
                                2: f"invalid JSON: {not_json}", 4: f"field 'd': {not_json}"}
    assert decoded.table.column("d").to_pylist() == [2.5, -0.0]


def test_bad_values_mixed_into_a_large_chunk_stay_aligned(ranged_decoder):
    bad = [b'{"ts": "0000-01-01 00:00:00"}', b'{"day": "0000-01-01"}', b'{"f": 1e39}', b'{"d": NaN}',
           b'{"price": 1e12}']
    values = [bad[(i // 101) % len(bad)] if i % 101 == 0 else json.dumps({"id": i, "f": i / 8}).encode()
              for i in range(10_000)]
    decoded = ranged_decoder.decode(values)
    assert_consistent(decoded, 10_000)
    assert [index for index, _reason in decoded.errors] == list(range(0, 10_000, 101))
    assert decoded.table.column("id").to_pylist() == [i for i in range(10_000) if i % 101]


def test_access_log_times_outside_what_hive_and_spark_read_back_are_rejected(access_log_decoder):
    values = [b"0000-01-01 00:00:00 ERROR year zero", b"0001-01-01 12:00:00 INFO first day",
              b"0001-01-02 00:00:00 INFO ok", b"9999-12-30 23:59:59 INFO ok too", b"9999-12-31 00:00:00 WARN last day"]
    decoded = access_log_decoder.decode(values)
    assert_consistent(decoded, len(values))
    outside = f"is outside the range Hive and Spark read back ({TS_RANGE})"
    assert reasons(decoded) == {0: f"log time '0000-01-01 00:00:00' {outside}",
                                1: f"log time '0001-01-01 12:00:00' {outside}",
                                4: f"log time '9999-12-31 00:00:00' {outside}"}
    assert decoded.table.column("message").to_pylist() == ["ok", "ok too"]


@pytest.mark.parametrize("literal", [b"NaN", b"Inf"])
@pytest.mark.parametrize("shift", [-3, -2, -1, 0, 1])
def test_the_scan_for_nan_or_inf_finds_a_literal_across_its_block_edges(monkeypatch, literal, shift):
    """The data buffer is scanned in blocks: a literal straddling two of them, or at the very end,
    is found; bytes that only start one are not taken for it."""
    from etl.rows.decoders import json_lines
    monkeypatch.setattr(json_lines, "HINT_SCAN_BLOCK", 64)
    head = b"x" * (64 + shift)
    assert json_lines._hinted_anywhere(pa.array([head[:40], head[40:] + literal + b"x"], pa.binary()))
    assert json_lines._hinted_anywhere(pa.array([head + literal], pa.binary()))
    assert not json_lines._hinted_anywhere(pa.array([head + b"NINaI", b"nNf"], pa.binary()))
    assert not json_lines._hinted_anywhere(pa.array([b""], pa.binary()))
