"""The real job, timed phase by phase through its observer hook (etl.job.observer), and the
check that a run loaded exactly what it should.

The phases are the Job's own (setup, plan, spark, tables, dimensions, tasks, check, register, commit,
markers, cleanup), summed over a run: a phase may be reported several times. The benchmark
adds `batch` (what one batch costs, without the once-per-process Spark start and table set-up),
`run_total` (the whole run_job) and `run_minus_tables`.
"""
from __future__ import annotations

import contextlib
import io
import time
from collections import defaultdict

from etl.job.observer import JobObserver, Phase

BATCH_PHASES = (Phase.PLAN, Phase.DIMENSIONS, Phase.TASKS, Phase.CHECK, Phase.REGISTER, Phase.COMMIT)


class PhaseTimes(JobObserver):
    """Sums the seconds the Job reports for each phase."""

    def __init__(self):
        self.seconds: dict[Phase, float] = defaultdict(float)

    def phase_done(self, phase: Phase, seconds: float) -> None:
        self.seconds[phase] += seconds

    def phases(self, wall: float) -> dict[str, float]:
        """{phase: seconds} for every phase, plus batch, run_minus_tables and run_total."""
        out = {phase.value: self.seconds.get(phase, 0.0) for phase in Phase}
        out["batch"] = sum(self.seconds.get(phase, 0.0) for phase in BATCH_PHASES)
        out["run_minus_tables"] = wall - out[Phase.TABLES.value] - out[Phase.SPARK.value]  # the once-per-process set-up
        out["run_total"] = wall
        return out


def run_job_timed(config, max_batches: int | None = 1) -> tuple[dict, str]:
    """etl.ops.run.run_job in this process, timed phase by phase; returns (phases, its stdout)."""
    from etl.ops.run import RunOptions, run_job
    times = PhaseTimes()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        started = time.monotonic()
        code = run_job(config, RunOptions(max_batches=max_batches), observer=times)
        wall = time.monotonic() - started
    if code != 0:
        raise RuntimeError(f"run_job exited {code}: {out.getvalue()}")
    return times.phases(wall), out.getvalue().strip()


def job_state(config) -> tuple[dict, object]:
    """Committed offsets {(topic, partition): value} and the last batch, read from ZooKeeper."""
    from etl.state.store import ZkStateStore
    with ZkStateStore(config.zookeeper, config.job.name, config.retry) as store:
        offsets = {k: v.value for k, v in store.offsets.committed_offsets().items()}
        last = store.batches.last_batch()
    return offsets, (last[0] if last else None)


def check_loaded(config, expected_ranges: list[tuple[str, int, int, int]], expected_rows: int) -> dict:
    """The run committed exactly the expected ranges, and wrote a row (or reject) for each record."""
    offsets, batch = job_state(config)
    if batch is None or batch.state.value != "COMMITTED":
        raise RuntimeError(f"job {config.job.name}: the batch is not COMMITTED: {batch}")
    ranges = sorted((r.topic, r.partition, r.start, r.end) for r in batch.ranges)
    if ranges != sorted(expected_ranges):
        raise RuntimeError(f"job {config.job.name}: batch ranges {ranges[:4]}... "
                           f"differ from {sorted(expected_ranges)[:4]}...")
    wrong = [(t, p, offsets.get((t, p)), end) for t, p, _s, end in expected_ranges if offsets.get((t, p)) != end]
    if wrong:
        raise RuntimeError(f"job {config.job.name}: committed offsets differ from the plan's ends: {wrong[:5]}")
    if (batch.rows or 0) + (batch.rejected or 0) != expected_rows:
        raise RuntimeError(f"job {config.job.name}: {batch.rows} rows + {batch.rejected} rejected != {expected_rows}")
    return {"batch_id": batch.batch_id, "rows": batch.rows, "rejected": batch.rejected, "ranges": len(ranges)}
