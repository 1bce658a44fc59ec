"""Fault points themselves (etl.faults), without Spark or services: a task that hits a `kill`
point dies with its job. The proofs that use fault points on the real stack (SIGKILLs, SIGSTOPs,
services that stop answering, the exactly-once oracle) are tests/integration/test_crash.py.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from tests.harness.kills import CLEANUP, fault_point_landed, sigkill


def test_fault_kill_from_a_task_kills_the_task_itself(tmp_path):
    """A task that hits a `kill` fault point must die with its job, as on a lost machine.

    PySpark's worker daemon moves the workers into a process group of its own, so
    etl.faults records the job's group in ETL_FAULT_PGID and kills that group. The task's own
    process is NOT in that group: it survives its own SIGKILL and goes on (until the daemon
    notices the dead JVM and SIGHUPs it) — long enough to finish and publish a 3,000-record
    file in a run observed here. This reproduces the situation without Spark: a process in a
    group of its own, ETL_FAULT_PGID naming another group (the "job"), hits a kill point.
    """
    job = subprocess.Popen(["sleep", "120"], start_new_session=True)  # stands for the driver's group
    try:
        code = ("import sys; from etl import faults; faults.checkpoint('writing:1'); "
                "print('still running after the kill point', flush=True)")
        env = {**os.environ, "ETL_FAULT_POINT": "writing:1", "ETL_FAULT_ACTION": "kill",
               "ETL_FAULT_PGID": str(job.pid)}
        task = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60,
                              start_new_session=True)
        assert job.wait(10) == -signal.SIGKILL  # the job's group was killed
        assert "still running" not in task.stdout and task.returncode == -signal.SIGKILL, (
            f"the task process survived its own kill fault point (rc {task.returncode}, {task.stdout!r})")
        fault_point_landed("a job's process group")
        fault_point_landed("a job's task")
    finally:
        if job.poll() is None:
            sigkill(job.pid, "sleep", purpose=CLEANUP)


def test_a_hold_pauses_until_its_marker_is_deleted(tmp_path):
    """`hold:<folder>` pauses the job at the point until the test deletes the marker it created,
    so a test acts while the job is surely there (a `sleep:` can end before a slow test acts)."""
    code = "from etl import faults; faults.checkpoint('renamed:0'); print('went on', flush=True)"
    env = {**os.environ, "ETL_FAULT_POINT": "renamed:0", "ETL_FAULT_ACTION": f"hold:{tmp_path}"}
    task = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not list(tmp_path.glob("held-*")) and time.monotonic() < deadline:
            time.sleep(0.05)
        [marker] = tmp_path.glob("held-*")
        time.sleep(1)
        assert task.poll() is None, "the job went on while its marker was still there"
        marker.unlink()
        assert task.wait(30) == 0 and task.stdout.read() == "went on\n"
    finally:
        if task.poll() is None:
            task.kill()
