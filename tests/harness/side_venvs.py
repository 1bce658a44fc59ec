"""The venvs of their own that three cells run from: .airflow-venv (the DAG test), .venv-spark35
(the Spark 3.5 line) and .venv-gssapi (Kafka over Kerberos).

scripts/test builds them in the background while the stack starts and pytest runs, and each
cell waits here for its own: on a fresh machine they took 108 s before pytest could start, the
stack 33 s. For each build, scripts/test writes `.stack/<name>-venv.pid` (the build's shell) and,
when it ends, `.stack/<name>-venv.rc` (its exit code) beside its log.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.harness.paths import REPO

STACK = REPO / ".stack"
BUILD_SECONDS = 900  # cold: under 2 minutes alone, up to 345 s beside the first tests (measured)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _build_pid(name: str, stack: Path) -> int | None:
    """The pid of scripts/test's build of `name` that has not ended yet, else None."""
    pid_file, rc_file = stack / f"{name}-venv.pid", stack / f"{name}-venv.rc"
    if not pid_file.exists() or rc_file.exists():
        return None
    pid = int(pid_file.read_text())
    return pid if _alive(pid) else None


def being_built(name: str, stack: Path = STACK) -> bool:
    """Whether scripts/test is building the venv `name` (airflow, spark35, gssapi) right now."""
    return _build_pid(name, stack) is not None


def wait_for(name: str, venv: Path, stack: Path = STACK, timeout: float = BUILD_SECONDS) -> Path:
    """`venv`, once scripts/test's build of it (if any) has ended; the test fails with the build's
    log if the build failed or the venv is missing."""
    deadline = time.monotonic() + timeout
    while being_built(name, stack) and time.monotonic() < deadline:
        time.sleep(0.2)
    log, rc_file = stack / f"{name}-venv.log", stack / f"{name}-venv.rc"
    if being_built(name, stack):
        pytest.fail(f"scripts/{name}-venv has not finished in {timeout:.0f} s (its log: {log})")
    if rc_file.exists() and rc_file.read_text().strip() != "0":
        pytest.fail(f"scripts/{name}-venv failed (exit {rc_file.read_text().strip()}):\n{log.read_text()[-3000:]}")
    if not (venv / "bin" / "python").exists():
        pytest.fail(f"{venv} is missing: scripts/{name}-venv installs it (scripts/test runs it)")
    return venv
