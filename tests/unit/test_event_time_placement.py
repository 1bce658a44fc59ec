"""Event-time partitioning without services: the partitioner's zones and daylight saving, the
placement of rows (NULL and late rules), the watermark, the config keys."""
from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from etl.config import LateData, MissingEventTime, PartitioningConfig, PartitionSource, load_config
from etl.errors import ConfigError
from etl.job.write_mode import PLANNING_TIME, configured_mode
from etl.model.partitioning import Granularity, Placement, TimePartitioner
from etl.rows.placement import place, planned_key
from etl.sink.markers import watermark
from etl.state.znodes import CommittedOffset
from tests.unit.test_config import BASE, write

UTC = dt.timezone.utc
MADRID = TimePartitioner(Granularity.HOUR, "Europe/Madrid")


def utc(*args) -> dt.datetime:
    return dt.datetime(*args, tzinfo=UTC)


def times(*values) -> pa.Array:
    return pa.array(values, pa.timestamp("ms"))


def partitions_of(partitioner: TimePartitioner, array: pa.Array) -> list:
    return [None if k is None else partitioner.values_of_key(k) for k in partitioner.wall_starts(array).to_pylist()]


def test_the_hour_an_autumn_change_repeats_is_one_partition_two_hours_long():
    # 2026-10-25 in Madrid: 02:00-03:00 CEST (00:00Z-01:00Z), then 02:00-03:00 CET (01:00Z-02:00Z).
    found = partitions_of(MADRID, times(dt.datetime(2026, 10, 24, 23, 59), dt.datetime(2026, 10, 25, 0, 30),
                                        dt.datetime(2026, 10, 25, 1, 30), dt.datetime(2026, 10, 25, 2, 0)))
    assert [f["hour"] for f in found] == ["01", "02", "02", "03"]
    window = MADRID.window({"dt": "2026-10-25", "hour": "02"})
    assert (window.start, window.end) == (utc(2026, 10, 25, 0), utc(2026, 10, 25, 2))


def test_the_hour_a_spring_change_skips_has_no_row_and_its_neighbours_are_one_hour():
    # 2026-03-29 in Madrid: 02:00 CET becomes 03:00 CEST at 01:00Z.
    found = partitions_of(MADRID, times(dt.datetime(2026, 3, 29, 0, 59), dt.datetime(2026, 3, 29, 1, 0)))
    assert [f["hour"] for f in found] == ["01", "03"]
    assert MADRID.window({"dt": "2026-03-29", "hour": "01"}).end == utc(2026, 3, 29, 1)
    assert MADRID.window({"dt": "2026-03-29", "hour": "03"}).start == utc(2026, 3, 29, 1)


def test_days_are_local_midnight_to_midnight_and_null_stays_null():
    daily = TimePartitioner(Granularity.DAY, "America/New_York")
    assert partitions_of(daily, times(dt.datetime(2026, 11, 21, 4, 59), dt.datetime(2026, 11, 21, 5, 0), None)) == [
        {"dt": "2026-11-20"}, {"dt": "2026-11-21"}, None]
    window = daily.window({"dt": "2026-11-01"})  # the autumn change: 25 hours
    assert window.end - window.start == dt.timedelta(hours=25)


def placement(**overrides) -> Placement:
    settings = PartitioningConfig(source=PartitionSource.COLUMN, column="ts", **overrides.pop("settings", {}))
    built = Placement.of(settings, TimePartitioner(), utc(2026, 11, 24, 9, 15), overrides.pop("late_before_ms", None))
    return Placement.from_json(built.to_json())  # what a resumed task gets


def rows(*values) -> pa.Table:
    return pa.table({"ts": times(*values), "kafka_offset": pa.array(range(len(values)), pa.int64())})


def test_a_null_event_time_is_rejected_or_placed_at_planning_time():
    data = rows(dt.datetime(2026, 11, 20, 7, 5), None)
    rejected = place(data, placement())
    assert [i for i, _ in rejected.rejected] == [1] and rejected.rejected[0][1].startswith("no event time")
    kept = place(data, placement(settings={"on_missing_event_time": MissingEventTime.PLANNING_TIME}))
    assert kept.rejected == [] and kept.keys[1].as_py() == planned_key(placement())
    assert TimePartitioner().values_of_key(kept.keys[1].as_py()) == {"dt": "2026-11-24", "hour": "09"}
    assert kept.max_event_ms == int(utc(2026, 11, 20, 7, 5).timestamp() * 1000)


def test_rows_of_a_partition_due_its_marker_are_late_written_or_rejected():
    due = int(utc(2026, 11, 20, 8).timestamp() * 1000)  # hours ending at or before 08:00 are due
    data = rows(dt.datetime(2026, 11, 20, 7, 59), dt.datetime(2026, 11, 20, 8, 0))
    written = place(data, placement(late_before_ms=due))
    assert written.late.to_pylist() == [True, False] and written.rejected == []
    refused = place(data, placement(late_before_ms=due, settings={"late_data": LateData.REJECT}))
    assert [i for i, _ in refused.rejected] == [0] \
        and refused.rejected[0][1].startswith("late: partition dt=2026-11-20/hour=07")


def offset(max_event: dt.datetime | None, active: dt.datetime | None) -> CommittedOffset:
    return CommittedOffset(10, 1, 0, None, None if max_event is None else int(max_event.timestamp() * 1000),
                           None if active is None else active.isoformat())


def test_the_watermark_is_the_minimum_of_active_partitions_and_the_maximum_once_all_are_idle():
    now = utc(2026, 11, 24, 12)
    recent, old = now - dt.timedelta(seconds=30), now - dt.timedelta(hours=2)
    ms = lambda t: int(t.timestamp() * 1000)  # noqa: E731
    committed = {("t", 0): offset(utc(2026, 11, 24, 11), recent), ("t", 1): offset(utc(2026, 11, 24, 9), recent),
                 ("t", 2): offset(utc(2026, 11, 24, 3), old), ("t", 3): offset(None, recent)}
    assert watermark(committed, now, idle_seconds=600) == ms(utc(2026, 11, 24, 9))  # t[2] idle, t[3] no time
    assert watermark(committed, now, idle_seconds=3 * 3600) == ms(utc(2026, 11, 24, 3))  # nothing idle
    assert watermark({k: v for k, v in committed.items() if k[1] == 2}, now, 600) == ms(utc(2026, 11, 24, 3))
    assert watermark({("t", 3): offset(None, recent)}, now, 600) is None


@pytest.mark.parametrize("line, message", [
    ("partition_by = event", r"\[hive\] partition_by: 'event' is not valid: 'event' is not one of planning_time"),
    ("partition_by = column:9x", r"\[hive\] partition_by: .*'9x' is not a column name"),
    ("partition_timezone = Mars/Olympus", r"\[hive\] partition_timezone: .*not an IANA time zone"),
    ("on_missing_event_time = drop", r"\[hive\] on_missing_event_time: 'drop' is not one of reject, planning_time"),
    ("late_data = reject", r"\[hive\] late_data: reject needs success_markers = true"),
    ("max_open_partition_files = 0", r"\[hive\] max_open_partition_files: must be greater than 0"),
])
def test_bad_partitioning_keys_are_named(tmp_path, request, line, message):
    text = BASE.format(schema=request.config.rootpath / "warehouse_schema" / "events.sql") + line + "\n"
    with pytest.raises(ConfigError, match=message):
        load_config(write(tmp_path, text))


def test_partitioning_keys_parse_into_typed_settings(tmp_path, request):
    text = BASE.format(schema=request.config.rootpath / "warehouse_schema" / "events.sql")
    config = load_config(write(tmp_path, text + "partition_by = column:TS\npartition_timezone = Europe/Madrid\n"))
    settings = config.hive.partitioning
    assert (settings.source, settings.column, settings.event_column, settings.timezone) == (
        PartitionSource.COLUMN, "ts", "ts", "Europe/Madrid")
    assert configured_mode(load_config(write(tmp_path, text)).hive.partitioning) is PLANNING_TIME
