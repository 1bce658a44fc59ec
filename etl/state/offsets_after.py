"""The committed offsets a batch leaves, computed without ZooKeeper: why a batch cannot commit
over the offsets it finds (`commit_conflict`), and the offsets, topic ids and event times once it
has (`offsets_after`). The batches part (etl.state.batches) writes them; the in-memory store of the
tests computes them the same way.
"""
from __future__ import annotations

import logging

from etl.model.batch import Batch, BatchKind, OffsetRange
from etl.state.snapshots import CommittedState
from etl.state.znodes import CommittedOffset

log = logging.getLogger(__name__)


def commit_conflict(batch: Batch, state: CommittedState, base: int | None) -> str:
    """Why the batch cannot commit over `state`: an offset is not where the plan started,
    or anything moved the pointer since the plan (a reset, another commit; `base` is the
    pointer version the plan started from); "" if nothing."""
    mismatches = []
    for r in batch.ranges:
        found = state.offsets.get((r.topic, r.partition))
        found_value = None if found is None else found.value
        if found_value != r.expected:
            mismatches.append(f"{r.topic}[{r.partition}]: plan expects {r.expected}, ZooKeeper has {found_value}")
    if not mismatches and (base is None or base == state.version):
        return ""
    why = "; ".join(mismatches[:10]) or (f"the committed offsets were moved (pointer version {state.version}, "
                                         f"the plan started from {base})")
    return (f"batch {batch.batch_id} cannot commit: committed offsets moved since it was planned ({why}). "
            f"Another writer or a manual reset changed them; run `etl status` and reconcile before running "
            f"again.")


def offsets_after(batch: Batch, state: CommittedState) -> tuple[dict[tuple[str, int], CommittedOffset],
                                                                  dict[str, str]]:
    """The committed offsets and topic ids once `batch` is committed over `state`."""
    offsets = dict(state.offsets)
    skipped = {(s.topic, s.partition) for s in batch.skipped}
    for r in batch.ranges:
        offsets[(r.topic, r.partition)] = _moved(batch, r, offsets.get((r.topic, r.partition)), skipped)
    topic_ids = dict(state.topic_ids)
    if batch.kind is BatchKind.LOAD:
        topic_ids.update((topic, topic_id) for topic, topic_id in batch.topic_ids.items() if topic_id)
    return offsets, topic_ids


def _moved(batch: Batch, r: OffsetRange, found: CommittedOffset | None, skipped: set) -> CommittedOffset:
    """The partition's committed offset once the range is loaded."""
    last = batch.last_records.get(f"{r.topic}:{r.partition}")
    high, active = _event_time(batch, r, found)
    if found is None:
        return CommittedOffset(r.end, 0, r.start, last, high, active, r.incarnation)
    # After a skip the old record is no witness of the new log; else keep it when the range read none.
    kept = last or (None if (r.topic, r.partition) in skipped else found.last)
    if r.incarnation != found.incarnation:  # the topic was recreated: the new incarnation starts at the range
        return CommittedOffset(r.end, 0, r.start, kept, high, active, r.incarnation, found.incarnations)
    return CommittedOffset(r.end, 0, found.origin, kept, high, active, found.incarnation, found.past)


def _event_time(batch: Batch, r: OffsetRange, found: CommittedOffset | None) -> tuple[int | None, str | None]:
    """The partition's latest event time and last activity, carried forward and moved by this
    batch's range: what the event-time watermark is computed from."""
    high, active = (None, None) if found is None else (found.max_event_ms, found.active_at)
    bound = batch.event_time.future_after_ms
    if high is not None and bound is not None and high > bound:
        # Only a release without [hive] max_future_seconds stored a time this far ahead (a
        # sentinel such as 9999-12-31): kept, it would pin the watermark for good.
        log.warning("%s[%d]: the stored latest event time is more than [hive] max_future_seconds ahead of batch "
                    "%d's planning time; replaced by the batch's own", r.topic, r.partition, batch.batch_id)
        high = None
    return batch.event_time.event_times_after(r, high, active)
