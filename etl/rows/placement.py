"""Which Hive partition each row of a chunk belongs to, under event-time partitioning.

Vectorised: a row's partition key is the start of its partition as the zone's wall clock in
ms (etl.model.partitioning.TimePartitioner.wall_starts). The batch's Placement, fixed in its
plan, decides everything else, so that every attempt places the same rows the same way:
  - a NULL event time is rejected (on_missing_event_time = reject) or placed in the batch's
    planning-time partition (planning_time);
  - a row whose partition was due its `_SUCCESS` when the batch was planned (its window ended
    at or before the plan's late_before_ms) is late: written and counted (late_data = write)
    or rejected with the reason "late" (reject);
  - a row whose event time is more than max_future_seconds ahead of the planning time (after
    the plan's future_after_ms) is future: it never counts towards the latest event time that
    moves the watermark, and is written (future_data = write) or rejected with the reason
    "future" (reject);
  - a row of a partition past [hive] max_partitions_per_batch (after the plan's last_key, with
    on_too_many_partitions = reject) is rejected with the reason "too many partitions".
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from etl.config import FutureData, LateData, MissingEventTime
from etl.model.naming import partition_path
from etl.model.partitioning import Placement


@dataclass(frozen=True)
class PlacedRows:
    keys: pa.Int64Array  # each row's partition key
    late: pa.BooleanArray  # each row: its partition was already due its _SUCCESS
    rejected: list[tuple[int, str]]  # (row position, reason) of rows that must not be written
    max_event_ms: int | None  # the latest event time among the rows


def planned_key(placement: Placement) -> int:
    """The key of the batch's planning-time partition."""
    return placement.partitioner.key_of(placement.planned)


def place(rows: pa.Table, placement: Placement) -> PlacedRows:
    times = rows.column(placement.column).combine_chunks()
    keys = placement.partitioner.wall_starts(times)
    rejected = []
    if keys.null_count:
        missing = pc.is_null(keys)
        keys = pc.fill_null(keys, planned_key(placement))
        if placement.on_missing is MissingEventTime.REJECT:
            reason = (f"no event time: {placement.column} is NULL ([hive] on_missing_event_time = reject; "
                      f"planning_time would place it in the batch's planning-time partition)")
            rejected += [(i, reason) for i in pc.indices_nonzero(missing).to_pylist()]
            keys = pc.if_else(missing, pa.scalar(None, pa.int64()), keys)  # rejected: not late as well
    late = _late(keys, placement)
    if placement.late_data is LateData.REJECT and pc.any(late).as_py():
        rejected += [(i, _late_reason(placement, keys[i].as_py())) for i in pc.indices_nonzero(late).to_pylist()]
    millis = times.cast(pa.int64())
    future = _future(millis, placement)
    if placement.future_data is FutureData.REJECT and pc.any(future).as_py():
        rejected += [(i, _future_reason(placement, millis[i].as_py())) for i in pc.indices_nonzero(future).to_pylist()]
    past_cap = _past_cap(keys, placement)
    if past_cap is not None:
        already = {i for i, _reason in rejected}  # one reason a row: it is rejected once
        rejected += [(i, _cap_reason(placement, keys[i].as_py())) for i in pc.indices_nonzero(past_cap).to_pylist()
                     if i not in already]
        future = pc.or_(future, past_cap)  # not written: it must not advance the watermark either
    # A future row never advances the watermark, written or not.
    highest = pc.max(pc.if_else(future, pa.scalar(None, pa.int64()), millis)).as_py()
    return PlacedRows(keys, late, sorted(rejected), highest)


def _future(millis: pa.Array, placement: Placement) -> pa.BooleanArray:
    if placement.future_after_ms is None:
        return pa.repeat(pa.scalar(False), len(millis))
    return pc.fill_null(pc.greater(millis, pa.scalar(placement.future_after_ms, pa.int64())), False)


def _utc_text(ms: int) -> str:
    return (dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=ms)).isoformat(timespec="seconds") + "Z"


def _future_reason(placement: Placement, event_ms: int) -> str:
    ahead = (event_ms - placement.future_after_ms) / 1000
    return (f"future: event time {_utc_text(event_ms)} is more than [hive] max_future_seconds ahead of the batch's "
            f"planning time (by {ahead:.0f}s past the bound; [hive] future_data = reject; write would keep the row "
            f"in its partition without moving the watermark)")


def _past_cap(keys: pa.Array, placement: Placement) -> pa.BooleanArray | None:
    """Rows of partitions past [hive] max_partitions_per_batch (on_too_many_partitions = reject)."""
    if placement.last_key is None:
        return None
    past = pc.fill_null(pc.greater(keys, pa.scalar(placement.last_key, pa.int64())), False)
    return past if pc.any(past).as_py() else None


def _cap_reason(placement: Placement, key: int) -> str:
    where = partition_path(placement.partitioner.values_of_key(key))
    return (f"too many partitions: partition {where} is past [hive] max_partitions_per_batch for this batch "
            f"(on_too_many_partitions = reject keeps the earliest partitions of a batch)")


def _late(keys: pa.Array, placement: Placement) -> pa.BooleanArray:
    if placement.late_before_ms is None or not len(keys):
        return pa.repeat(pa.scalar(False), len(keys))
    ends = {key: placement.partitioner.window_end_ms(key) for key in pc.unique(keys).to_pylist() if key is not None}
    due = [key for key, end in ends.items() if end <= placement.late_before_ms]
    return pc.fill_null(pc.is_in(keys, value_set=pa.array(due, pa.int64())), False)


def _late_reason(placement: Placement, key: int) -> str:
    where = partition_path(placement.partitioner.values_of_key(key))
    return (f"late: partition {where} was already due its _SUCCESS when the batch was planned "
            f"([hive] late_data = reject)")
