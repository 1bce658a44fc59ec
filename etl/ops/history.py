"""`etl history`: the job's last batches as ZooKeeper keeps them (the newest BATCHES_KEPT), newest
first, with their times, counts and throughput.

A batch's committed time is its record's last update once it is COMMITTED, so its duration runs
from its plan to its commit: for a batch that a later run resumed it includes the time between
the two runs. Whether a batch was resumed is not recorded in ZooKeeper, so history does not say.
"""
from __future__ import annotations

import datetime as dt

from etl.job.summary import written_files
from etl.model.batch import TABLE_ROWS_KEY, Batch, BatchState
from etl.state.protocols import BatchPart


def collect_history(store: BatchPart, limit: int) -> list[dict]:
    """The newest `limit` batches, newest first."""
    return [batch_json(store.read_batch(batch_id)[0]) for batch_id in reversed(store.batch_ids()[-limit:])]


def batch_json(batch: Batch) -> dict:
    committed_at = batch.updated_at if batch.state is BatchState.COMMITTED else None
    seconds = _seconds_between(batch.planned_at, committed_at)
    rows = batch.rows
    return {
        "batch_id": batch.batch_id, "kind": batch.kind.value, "state": batch.state.value,
        "planned_at": batch.planned_at, "planned_by": batch.planned_by, "committed_at": committed_at,
        "duration_seconds": seconds, "files": written_files(batch), "records": batch.record_count,
        "rows": rows, "rejected": batch.rejected,
        "rows_per_second": None if rows is None or not seconds else round(rows / seconds, 1),
        "snapshot": batch.snapshot or None,  # the committed offsets after it (etl.state.snapshots)
        **({"table_rows": batch.extra[TABLE_ROWS_KEY]} if TABLE_ROWS_KEY in batch.extra else {}),  # a routed job's
    }


def _seconds_between(start: str, end: str | None) -> float | None:
    if not start or not end:
        return None
    return (dt.datetime.fromisoformat(end) - dt.datetime.fromisoformat(start)).total_seconds()


def render_history(job: str, batches: list[dict]) -> str:
    if not batches:
        return f"job {job}: no batch yet"
    header = (f"{'batch':>7} {'kind':<6} {'state':<10} {'planned at (UTC)':<19} {'committed at (UTC)':<19} "
              f"{'seconds':>8} {'rows':>10} {'rejected':>8} {'rows/s':>9}")
    lines = [f"job {job}: the last {len(batches)} batches, newest first", header]
    for b in batches:
        lines.append(f"{b['batch_id']:>7} {b['kind']:<6} {b['state']:<10} {_time(b['planned_at']):<19} "
                     f"{_time(b['committed_at']):<19} {_number(b['duration_seconds'], '.0f'):>8} "
                     f"{_number(b['rows'], 'd'):>10} {_number(b['rejected'], 'd'):>8} "
                     f"{_number(b['rows_per_second'], '.0f'):>9}")
        if "table_rows" in b:
            lines.append("        rows by table: " + ", ".join(f"{t} {n}" for t, n in b["table_rows"].items()))
    return "\n".join(lines)


def _time(iso: str | None) -> str:
    """2026-11-24T14:00:05+00:00 as 2026-11-24 14:00:05, in UTC."""
    if not iso:
        return "-"
    return dt.datetime.fromisoformat(iso).astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _number(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)
