"""Test-only fault points, so that crash tests can SIGKILL the job at an exact step.

`ETL_FAULT_POINT` names one point, e.g. `state:PLANNED` (the driver, right after a batch
reached that state) or `renamed:3` (a task, right after it published the file of Kafka
partition 3). When the point is reached, the driver's whole process group (driver, JVM,
Python workers) is killed with SIGKILL, as `kill -9` or a lost machine would; tests start
the job in its own group. Unset (always, in production), a checkpoint costs one dict lookup.
"""
from __future__ import annotations

import os
import signal

ENV = "ETL_FAULT_POINT"
_PGID_ENV = "ETL_FAULT_PGID"


def arm() -> None:
    """Called by the driver before Spark starts: PySpark's worker daemon moves workers into a
    process group of their own, so tasks must be told which group is the job's."""
    if ENV in os.environ:
        os.environ.setdefault(_PGID_ENV, str(os.getpgrp()))


def checkpoint(point: str) -> None:
    if os.environ.get(ENV) == point:
        os.killpg(int(os.environ.get(_PGID_ENV, os.getpgrp())), signal.SIGKILL)
