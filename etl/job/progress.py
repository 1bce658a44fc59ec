"""A progress line every few seconds while a batch's Spark tasks run:

    batch 12 tasks: 3/8 ranges done, 1,234,567 rows, 98,000 rows/s

Ranges done come from Spark's status tracker (the tasks of the batch's job group: one task per
range); rows from an accumulator each task adds its row count to when it ends (Spark sends a
task's accumulator updates with its result, so rows move in steps of whole ranges). The lines
are INFO log lines: -q hides them, and a pipe or a log collector gets them as plain lines.
"""
from __future__ import annotations

import contextlib
import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterator

log = logging.getLogger(__name__)
GROUP_PROPERTY = "spark.jobGroup.id"


@dataclass(frozen=True)
class Snapshot:
    batch_id: int
    ranges: int
    done: int
    rows: int
    seconds: float

    def describe(self) -> str:
        rate = self.rows / self.seconds if self.seconds > 0 else 0.0
        return (f"batch {self.batch_id} tasks: {self.done}/{self.ranges} ranges done, {self.rows:,} rows, "
                f"{rate:,.0f} rows/s")


class Progress:
    """What the reporting thread reads; `counted` wraps the task function so that it counts."""

    def __init__(self, context, batch_id: int, ranges: int):
        self.context, self.batch_id, self.ranges = context, batch_id, ranges
        self.group = f"etl-batch-{batch_id}"
        self.rows = context.accumulator(0)
        self.started = time.monotonic()

    def counted(self, task_function: Callable) -> Callable:
        return _Counted(task_function, self.rows)

    def snapshot(self) -> Snapshot:
        return Snapshot(self.batch_id, self.ranges, self._tasks_done(), self.rows.value,
                        time.monotonic() - self.started)

    def _tasks_done(self) -> int:
        tracker = self.context.statusTracker()
        done = 0
        for job_id in tracker.getJobIdsForGroup(self.group):
            job = tracker.getJobInfo(job_id)
            for stage_id in job.stageIds if job else ():
                stage = tracker.getStageInfo(stage_id)
                done += stage.numCompletedTasks if stage else 0
        return min(done, self.ranges)  # a retried stage counts its tasks again


class _Counted:
    """The task function, adding the rows of each finished range (picklable: it runs on executors)."""

    def __init__(self, function: Callable, rows):
        self.function, self.rows = function, rows

    def __call__(self, task):
        result = self.function(task)
        self.rows.add(result.rows)
        return result


@contextlib.contextmanager
def reporting(context, batch_id: int, ranges: int, every_seconds: float) -> Iterator[Progress]:
    """Log a progress line every `every_seconds` until the block ends. The Spark jobs the block
    starts belong to the batch's job group (thread-local in PySpark: start them in this thread)."""
    progress = Progress(context, batch_id, ranges)
    context.setLocalProperty(GROUP_PROPERTY, progress.group)  # what setJobGroup sets; cleared after
    stop = threading.Event()
    thread = threading.Thread(target=_report, args=(progress, stop, every_seconds), daemon=True,
                              name=f"progress-batch-{batch_id}")
    thread.start()
    try:
        yield progress
    finally:
        stop.set()
        thread.join(timeout=every_seconds + 5)
        context.setLocalProperty(GROUP_PROPERTY, None)  # later jobs (Hive DDL) are not the batch's


def _report(progress: Progress, stop: threading.Event, every_seconds: float) -> None:
    while not stop.wait(every_seconds):
        try:
            line = progress.snapshot().describe()
        except Exception as exc:  # a progress line is never worth failing a batch for
            log.warning("batch %d: no more progress lines: %s", progress.batch_id, exc)
            return
        log.info(line)
