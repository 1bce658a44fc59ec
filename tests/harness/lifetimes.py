"""Clusters of the session's own, stopped as soon as no test left on this process needs them.

The session fixtures that start clusters (tests/integration/conftest.py: the YARN over its
private HDFS, the standalone cluster, the KDC with its kerberized HDFS and metastore) run in
groups (CLUSTER_GROUPS), and the tests that use them run together, group after group
(tests/conftest.py). On two workers they run first, on one worker (tests/harness/parallel.py):
a cluster that pytest kept until the session ended idled through the other half hour of that
worker's modules, its daemons' heartbeats and timers taking CPU from the tests on both cores.
So once the next test on this process belongs to a later group, or to no group, each cluster of
an earlier group is stopped, as its fixture would have stopped it at the session's end (the
same ExitStack, closed once). A test that asks for a cluster stopped so fails, naming it: the
order that made it unneeded was wrong.
"""
from __future__ import annotations

from contextlib import ExitStack, contextmanager
from typing import Iterator

import pytest

# Session fixtures that start clusters of the session's own, by the group they run in (1 first);
# a cluster that another one needs is stopped first (reverse order of start).
CLUSTER_GROUPS = {"yarn": 1, "spark_standalone": 1, "kdc": 2, "secure_hdfs": 2, "secure_metastore": 2}

_RUNNING: list[tuple[str, ExitStack]] = []
STOPPED_EARLY: set[str] = set()


@contextmanager
def held(name: str) -> Iterator[ExitStack]:
    """Within a session fixture: the ExitStack that stops the cluster `name`; closed at the
    session's end, or earlier by stop_unneeded."""
    if name not in CLUSTER_GROUPS:
        raise ValueError(f"{name} is not in CLUSTER_GROUPS")
    stack = ExitStack()
    _RUNNING.append((name, stack))
    try:
        yield stack
    finally:
        _stop(name)


def to_stop(running: list[str], next_group: int | None) -> list[str]:
    """The running clusters (in the order they started) to stop before a test of `next_group`
    (None: a test of no group, or no test), latest first."""
    return [name for name in reversed(running) if next_group is None or CLUSTER_GROUPS[name] < next_group]


def stop_unneeded(next_group: int | None) -> None:
    for name in to_stop([name for name, _ in _RUNNING], next_group):
        _stop(name)
        STOPPED_EARLY.add(name)


def refuse_stopped(fixture_names: list[str]) -> None:
    stopped = sorted(STOPPED_EARLY.intersection(fixture_names))
    if stopped:
        pytest.fail(f"{', '.join(stopped)} was stopped when the tests of its group ended (tests/harness/lifetimes.py); "
                    f"this test runs after them: its module belongs in CLUSTER_GROUPS' order", pytrace=False)


def _stop(name: str) -> None:
    for i, (running, stack) in enumerate(_RUNNING):
        if running == name:
            del _RUNNING[i]
            stack.close()
            return
