"""Which incarnation of its topic each planned range reads (etl.model.identity has the tags).

A range goes on in its partition's committed incarnation, but where the plan skips into another
incarnation of the topic: then its files carry the new incarnation's tag, so that they never take
the old incarnation's names for the same offsets (etl.model.naming). A skip enters a new
incarnation when the topic was recreated (the topic id or the last record says so), or when it
restarts below the committed offset and no topic id proves the topic the same: Kafka never hands
out an offset of one topic twice. Where the ids are equal and the log still ends below the
committed offset (an unclean leader election truncated it), the partition stays in its
incarnation, and `etl verify` names the offsets loaded twice.
"""
from __future__ import annotations

from dataclasses import replace

from etl.model.batch import SkippedRange
from etl.model.identity import incarnation_tag
from etl.model.planner import Plan


def with_incarnations(plan: Plan, current: dict[tuple[str, int], str], stored_ids: dict[str, str],
                      topic_ids: dict[str, str | None]) -> Plan:
    """`plan` with each range's incarnation set. `current`: each committed partition's incarnation
    tag; `stored_ids`: the topic ids stored at commit; `topic_ids`: those the broker reports now."""
    entered = {}
    for s in plan.skipped:
        if _enters_new(s, stored_ids.get(s.topic), topic_ids.get(s.topic)):
            entered[(s.topic, s.partition)] = _new_tag(current.get((s.topic, s.partition), ""), topic_ids.get(s.topic))
    ranges = tuple(replace(r, incarnation=entered.get((r.topic, r.partition), current.get((r.topic, r.partition), "")))
                   for r in plan.ranges)
    skipped = tuple(replace(s, incarnation=entered.get((s.topic, s.partition), "")) for s in plan.skipped)
    return replace(plan, ranges=ranges, skipped=skipped)  # keeps the partitions waiting on a transaction


def _enters_new(skip: SkippedRange, stored_id: str | None, topic_id: str | None) -> bool:
    return bool(skip.recreated) or (skip.restart_at < skip.committed and not (stored_id and stored_id == topic_id))


def _new_tag(old: str, topic_id: str | None) -> str:
    tag = incarnation_tag(topic_id)
    while tag == old:  # drawn at random (no topic id) as the one it leaves: draw again
        tag = incarnation_tag(None)
    return tag
