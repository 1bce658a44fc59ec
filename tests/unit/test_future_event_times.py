"""Event times far ahead of the load time, without services: they never advance the watermark
(written or rejected by [hive] future_data), a stored maximum beyond the bound is left out of the
watermark and replaced by the partition's next batch, and the keys are checked at the edge."""
from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from etl.config import FutureData, PartitioningConfig, PartitionSource, load_config
from etl.errors import ConfigError
from etl.model.batch import Batch, BatchState, EventTimeRecord, OffsetRange
from etl.model.partitioning import Placement, TimePartitioner
from etl.rows.placement import place
from etl.sink.markers import watermark
from etl.state.offsets_after import _event_time
from etl.state.znodes import CommittedOffset
from tests.unit.test_config import BASE, write

UTC = dt.timezone.utc
PLANNED = dt.datetime(2026, 11, 24, 17, 30, tzinfo=UTC)
SENTINEL = dt.datetime(9999, 12, 30)


def ms(at: dt.datetime) -> int:
    return int(at.replace(tzinfo=UTC).timestamp() * 1000)


def placement(**settings) -> Placement:
    config = PartitioningConfig(source=PartitionSource.COLUMN, column="ts", **settings)
    return Placement.from_json(Placement.of(config, TimePartitioner(), PLANNED, None).to_json())


def rows(*values) -> pa.Table:
    return pa.table({"ts": pa.array(values, pa.timestamp("ms")), "kafka_offset": pa.array(range(len(values)))})


def test_a_future_row_is_written_but_does_not_advance_the_latest_event_time():
    data = rows(dt.datetime(2026, 11, 24, 17, 20), SENTINEL, dt.datetime(2026, 11, 24, 18, 29))
    placed = place(data, placement())
    assert placed.rejected == [] and len(placed.keys) == 3
    assert placed.max_event_ms == ms(dt.datetime(2026, 11, 24, 18, 29))  # within the hour's bound: counts


def test_a_future_row_is_rejected_with_its_reason_when_asked():
    data = rows(dt.datetime(2026, 11, 24, 17, 20), SENTINEL, dt.datetime(2026, 11, 24, 18, 31))
    placed = place(data, placement(max_future_seconds=3600, future_data=FutureData.REJECT))
    assert [i for i, _ in placed.rejected] == [1, 2]
    assert placed.rejected[0][1].startswith("future: event time 9999-12-30T00:00:00Z is more than [hive] "
                                            "max_future_seconds ahead")
    assert placed.max_event_ms == ms(dt.datetime(2026, 11, 24, 17, 20))


def test_only_future_rows_leave_no_latest_event_time_and_a_plan_without_the_bound_has_none():
    assert place(rows(SENTINEL), placement()).max_event_ms is None
    old_plan = {k: v for k, v in placement().to_json().items() if k not in ("future_after_ms", "future_data")}
    assert place(rows(SENTINEL), Placement.from_json(old_plan)).max_event_ms == ms(SENTINEL)


def offset(max_event: dt.datetime | None) -> CommittedOffset:
    return CommittedOffset(10, 1, 0, None, None if max_event is None else ms(max_event), PLANNED.isoformat())


def test_a_stored_maximum_beyond_the_bound_does_not_pin_the_watermark():
    now = PLANNED.replace(tzinfo=None)
    committed = {("t", 0): offset(SENTINEL), ("t", 1): offset(now - dt.timedelta(minutes=10))}
    assert watermark(committed, PLANNED, 600) == ms(now - dt.timedelta(minutes=10))  # the minimum: unchanged
    alone = {("t", 0): offset(SENTINEL)}
    assert watermark(alone, PLANNED, 600) == ms(SENTINEL)  # no bound: trusted, as before
    assert watermark(alone, PLANNED, 600, max_future_seconds=3600) is None  # bounded: left out
    ahead = {("t", 0): offset(now + dt.timedelta(minutes=30)), ("t", 1): offset(SENTINEL)}
    assert watermark(ahead, PLANNED, 0, max_future_seconds=3600) == ms(now + dt.timedelta(minutes=30))


def test_the_next_batch_replaces_a_stored_maximum_beyond_its_bound():
    batch = Batch(batch_id=7, state=BatchState.PLANNED, planned_at=PLANNED.isoformat(), partition_values={},
                  ranges=(OffsetRange("t", 0, 10, 12, 10),), planned_by="me", updated_at=PLANNED.isoformat(),
                  event_time=EventTimeRecord(placement().to_json(),
                                             event_high={"t:0": ms(dt.datetime(2026, 11, 24, 17, 25))}))
    high, _ = _event_time(batch, batch.ranges[0], offset(SENTINEL))
    assert high == ms(dt.datetime(2026, 11, 24, 17, 25))
    sane = offset(dt.datetime(2026, 11, 24, 17, 29))  # a sane maximum only grows, as before
    assert _event_time(batch, batch.ranges[0], sane)[0] == ms(dt.datetime(2026, 11, 24, 17, 29))


def test_the_keys_parse_and_bad_values_are_named(tmp_path, request):
    text = BASE.format(schema=request.config.rootpath / "warehouse_schema" / "events.sql")
    settings = load_config(write(tmp_path, text)).hive.partitioning
    assert (settings.max_future_seconds, settings.future_data) == (3600.0, FutureData.WRITE)
    settings = load_config(write(tmp_path, text + "max_future_seconds = 60\nfuture_data = reject\n")).hive.partitioning
    assert (settings.max_future_seconds, settings.future_data) == (60.0, FutureData.REJECT)
    for line, message in (("max_future_seconds = -1", r"\[hive\] max_future_seconds"),
                          ("future_data = drop", r"\[hive\] future_data: 'drop' is not one of write, reject")):
        with pytest.raises(ConfigError, match=message):
            load_config(write(tmp_path, text + line + "\n"))
