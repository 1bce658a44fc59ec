"""The Job's observer hooks: how long each phase of a run took, each batch committed, and a run
that found the job's lock held.

The default observer ignores them; the benchmark (tests/perf) and the metrics (etl.ops.metrics)
subscribe. A phase may be reported more than once in a run (one report per batch, per table ensure)."""
from __future__ import annotations

import contextlib
import time
from enum import StrEnum
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    from etl.job.summary import BatchSummary
    from etl.model.batch import Batch
    from etl.sink.warehouse import Warehouse


class Phase(StrEnum):
    SETUP = "setup"  # ZooKeeper session, lock, Kafka metadata client (etl.ops.run)
    PLAN = "plan"  # read the open batch or plan a new one, and store the plan
    SPARK = "spark"  # start the driver JVM, the SparkContext and the session: once per process
    TABLES = "tables"  # the metastore client, and create or evolve the tables: once per process
    DIMENSIONS = "dimensions"  # load (or re-check) the dimension tables of a batch
    TASKS = "tasks"  # the Spark tasks that read Kafka and write the files
    CHECK = "check"  # every planned file is there, temp files swept, WRITTEN stored
    REGISTER = "register"  # Hive partitions added, REGISTERED stored
    COMMIT = "commit"  # the fenced offsets transaction
    MARKERS = "markers"  # _SUCCESS markers of closed windows
    CLEANUP = "cleanup"  # old batch nodes pruned, lock released


class JobObserver:
    """Subclass and override what you need; every hook is a no-op here."""

    def phase_done(self, phase: Phase, seconds: float) -> None:
        pass

    def batch_committed(self, summary: "BatchSummary", batch: "Batch") -> None:
        """A batch reached COMMITTED (etl.ops.run, after each batch); `batch` as committed."""

    def lock_held(self) -> None:
        """Another run holds the job's lock: this run does nothing (called before LockHeld)."""

    def consumer_group_commit_failed(self) -> None:
        """Mirroring the committed offsets to the Kafka consumer group failed (a WARNING was
        logged; etl.source.group_mirror): the run goes on."""

    def written_bytes(self, batch: "Batch", warehouse: "Warehouse") -> int | None:
        """The bytes of the batch's files, for the load totals its commit moves
        (etl.state.totals); None: not measured (only the metrics list the files' sizes)."""
        return None


NO_OBSERVER = JobObserver()


class PhaseTimeline(JobObserver):
    """Each phase as it ended, `(phase, started, seconds)`, passed on to `inner` as well.
    `started` is on time.monotonic()'s clock, which on Linux is the system's: whoever started the
    process places each phase in the process's life (`etl run --json`'s last line; the bench)."""

    def __init__(self, inner: JobObserver = NO_OBSERVER):
        self.inner = inner
        self.timeline: list[tuple[Phase, float, float]] = []

    def phase_done(self, phase: Phase, seconds: float) -> None:
        self.timeline.append((phase, time.monotonic() - seconds, seconds))
        self.inner.phase_done(phase, seconds)

    def batch_committed(self, summary: "BatchSummary", batch: "Batch") -> None:
        self.inner.batch_committed(summary, batch)

    def lock_held(self) -> None:
        self.inner.lock_held()

    def consumer_group_commit_failed(self) -> None:
        self.inner.consumer_group_commit_failed()

    def written_bytes(self, batch: "Batch", warehouse: "Warehouse") -> int | None:
        return self.inner.written_bytes(batch, warehouse)

    def report(self) -> dict:
        """What `etl run --json` prints last: each phase's seconds summed, and the timeline."""
        summed: dict[str, float] = {}
        for phase, _, seconds in self.timeline:
            summed[phase.value] = summed.get(phase.value, 0.0) + seconds
        return {"event": "phases", "seconds": {k: round(v, 4) for k, v in summed.items()},
                "timeline": [[phase.value, round(started, 4), round(seconds, 4)]
                             for phase, started, seconds in self.timeline],
                "clock": "monotonic"}


@contextlib.contextmanager
def timed(observer: JobObserver, phase: Phase) -> Iterator[None]:
    """Report the phase's duration, also when it raised (the time was spent all the same)."""
    started = time.monotonic()
    try:
        yield
    finally:
        observer.phase_done(phase, time.monotonic() - started)
