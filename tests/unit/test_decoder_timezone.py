"""[hive] partition_timezone in the decoders: a timestamp written without a zone is wall-clock
time in that zone, stored as the UTC instant it is; zoned text is unaffected."""
from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from etl.model.schema import load_table_schema
from etl.rows.decoders import make_decoder

SCHEMAS = Path(__file__).resolve().parents[2] / "warehouse_schema"


def json_ts(decoder, *texts):
    decoded = decoder.decode([json.dumps({"event_id": i, "ts": t}).encode() for i, t in enumerate(texts)])
    return decoded.table.column("ts").to_pylist(), decoded.errors


@pytest.fixture
def madrid():
    return make_decoder("json", load_table_schema(SCHEMAS / "events.sql"), zone="Europe/Madrid")


def test_utc_keeps_naive_text_as_written():
    decoder = make_decoder("json", load_table_schema(SCHEMAS / "events.sql"))
    assert json_ts(decoder, "2026-07-01 12:00:00") == ([dt.datetime(2026, 7, 1, 12)], [])


def test_naive_text_is_wall_clock_in_the_zone_and_zoned_text_is_not(madrid):
    times, errors = json_ts(madrid, "2026-01-15 12:00:00", "2026-07-01 12:00:00", "2026-07-01T12:00:00Z")
    assert errors == []
    assert times == [dt.datetime(2026, 1, 15, 11), dt.datetime(2026, 7, 1, 10), dt.datetime(2026, 7, 1, 12)]


def test_a_repeated_wall_time_takes_its_first_occurrence_and_a_skipped_one_is_rejected(madrid):
    times, errors = json_ts(madrid, "2026-10-25 02:30:00", "2026-03-29 02:30:00")
    assert times == [dt.datetime(2026, 10, 25, 0, 30)]  # CEST, the first 02:30
    assert [i for i, _ in errors] == [1]
    assert "'2026-03-29 02:30:00' does not exist in Europe/Madrid" in errors[0][1]


def test_access_log_lines_are_read_in_the_zone():
    decoder = make_decoder("access_log", load_table_schema(SCHEMAS / "access_log.sql"), zone="Europe/Madrid")
    decoded = decoder.decode([b"2026-07-01 12:00:00 INFO ok", b"2026-03-29 02:15:00 WARN gap"])
    assert decoded.table.column("log_time").to_pylist() == [dt.datetime(2026, 7, 1, 10)]
    assert [i for i, _ in decoded.errors] == [1] and "does not exist in Europe/Madrid" in decoded.errors[0][1]
