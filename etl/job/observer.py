"""The Job's observer hook: told how long each phase of a run took.

The default observer ignores it; the benchmark (tests/perf) and, later, metrics subscribe.
A phase may be reported more than once in a run (one report per batch, per table ensure)."""
from __future__ import annotations

import contextlib
import time
from enum import StrEnum
from typing import Iterator


class Phase(StrEnum):
    SETUP = "setup"  # ZooKeeper session, lock, Kafka metadata client (etl.job.runner)
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


NO_OBSERVER = JobObserver()


@contextlib.contextmanager
def timed(observer: JobObserver, phase: Phase) -> Iterator[None]:
    """Report the phase's duration, also when it raised (the time was spent all the same)."""
    started = time.monotonic()
    try:
        yield
    finally:
        observer.phase_done(phase, time.monotonic() - started)
