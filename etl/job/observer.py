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
    TABLES = "tables"  # start Spark and create or evolve the tables: once per process
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


@contextlib.contextmanager
def timed(observer: JobObserver, phase: Phase) -> Iterator[None]:
    """Report the phase's duration, also when it raised (the time was spent all the same)."""
    started = time.monotonic()
    try:
        yield
    finally:
        observer.phase_done(phase, time.monotonic() - started)
