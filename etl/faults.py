"""Test-only fault points, so that crash tests can SIGKILL the job at an exact step.

`ETL_FAULT_POINT` names one point, e.g. `state:PLANNED` (the driver, right after a batch
reached that state) or `renamed:3` (a task, right after it published the file of Kafka
partition 3). When the point is reached, the whole process group is killed with SIGKILL,
as an operator's `kill -9` or a lost machine would; tests start the job in its own group.
Unset (always, in production), a checkpoint costs one dictionary lookup.
"""
from __future__ import annotations

import os
import signal

ENV = "ETL_FAULT_POINT"


def checkpoint(point: str) -> None:
    if os.environ.get(ENV) == point:
        os.killpg(os.getpgrp(), signal.SIGKILL)
