"""Test-only fault points, so that crash tests can break the job at an exact step.

`ETL_FAULT_POINT` names one point (24 in all; <p> is a Kafka partition, <i> an output's index):
  state:PLANNED | state:WRITTEN | state:REGISTERED | state:COMMITTED   (driver, right after
      the batch reached that state in ZooKeeper)
  registered:<table>  (driver, a routed batch's partition added to that table in Hive, the
                 next table's not yet)
  writing:<p>   (task of Kafka partition p, after its first chunk went into the temp file)
  closed:<p>    (task of Kafka partition p, its temp files complete, not yet renamed)
  renamed:<p>   (task of Kafka partition p, right after it published its file)
  rollup:<p>    (task of Kafka partition p, right after each of its rollup partials was published)
  postgres:<rollup>  (driver, the rollup's PostgreSQL transaction committed, ZooKeeper's commit
                 not yet)
  part:<p>      (event-time task of Kafka partition p, right after each of its files, one per
                 Hive partition, was published)
  plan:ranges-written       (store, a plan's range chunks written, its header not yet)
  commit:snapshot-written   (store, the offsets' snapshot written, the pointer not yet moved)
  migrate:snapshot-written  (store, the old offset znodes copied to a snapshot, no pointer yet)
  legacy:file-moved         (`etl recover`, after each file of a padded partition is moved)
  local:linked              (a local filesystem's move without renameat2's RENAME_NOREPLACE:
                             the new name linked, the old not yet unlinked; unreached where it is
                             one atomic rename)
  compact:PLANNED           (a compaction's plan stored in ZooKeeper, no file merged yet)
  compact:merged:<i>        (the compaction's output i published in its new folder)
  compact:partials-folded   (a rollup's folded partial of a merged file published in its new folder)
  compact:WRITTEN           (every merged file in place, WRITTEN recorded; Hive reads the old folder)
  compact:partials-switched (the data partition, and a rollup's partials partition, point at their
                             new folders; the next rollup's not yet)
  compact:metastore-switched  (the Hive partitions point at the new folders; ZooKeeper does not
                               record it yet)
  compact:SWITCHED          (ZooKeeper records the switch and the partition's new folder)
  compact:DELETED           (the replaced files deleted after their grace period, the plan not yet)
`ETL_FAULT_ACTION` says what happens there:
  kill (default)        SIGKILL the job's whole process group (driver, JVM, Python workers),
                        as `kill -9` or a lost machine would; tests start the job in its own group
  sleep:<seconds>       pause, so a test can expire the session or stop a service meanwhile
  hold:<folder>         create a file `held-<pid>` in <folder> and pause until the test deletes it
                        (at most 10 minutes): the test acts while the job is surely paused there,
                        however slow the machine, and lets it go on when done
  raise                 raise InjectedFault (every attempt)
  raise-first-attempt   raise InjectedFault in a task's first attempt only (Spark retries it)
Unset, as always in production, a checkpoint costs one dictionary lookup.
"""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from etl.errors import InjectedFault

ENV = "ETL_FAULT_POINT"
ACTION_ENV = "ETL_FAULT_ACTION"
_PGID_ENV = "ETL_FAULT_PGID"
_HOLD_LIMIT_S = 600


def arm() -> None:
    """Called by the driver before Spark starts: PySpark's worker daemon moves workers into a
    process group of their own, so tasks must be told which group is the job's."""
    if ENV in os.environ:
        os.environ.setdefault(_PGID_ENV, str(os.getpgrp()))


def checkpoint(point: str) -> None:
    if os.environ.get(ENV) == point:
        _act(point, os.environ.get(ACTION_ENV, "kill"))


def _act(point: str, action: str) -> None:
    if action == "kill":
        os.killpg(int(os.environ.get(_PGID_ENV, os.getpgrp())), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)  # a task's worker sits in the daemon's group, not the job's
    elif action.startswith("sleep:"):
        time.sleep(float(action.split(":", 1)[1]))
    elif action.startswith("hold:"):
        _hold(Path(action.split(":", 1)[1]))
    elif action == "raise" or action == "raise-first-attempt" and _task_attempt() == 0:
        raise InjectedFault(f"injected fault at {point}")


def _hold(folder: Path) -> None:
    marker = folder / f"held-{os.getpid()}"
    marker.touch()
    deadline = time.monotonic() + _HOLD_LIMIT_S
    while marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def _task_attempt() -> int:
    from pyspark import TaskContext
    context = TaskContext.get()
    return context.attemptNumber() if context else 0
