"""The harness's view of a run's process tree. A JVM starts its children through a spawn helper
that then execs the real program in the same pid (java's jspawnhelper), so a descendant first
seen before its exec must be known, in the end, by what it became."""
from __future__ import annotations

import subprocess
import sys
import time

import psutil

from tests.harness.etl_process import ProcessTree
from tests.harness.kills import CLEANUP, sigkill

CHILD = """
import os, pathlib, sys, time
ready, go = map(pathlib.Path, sys.argv[1:3])
ready.touch()
while not go.exists():
    time.sleep(0.02)
os.execv("/bin/sleep", ["-".join(["became", "this"]), "30"])
"""


def _wait(predicate, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{what} within {timeout}s"
        time.sleep(0.02)


def _execed(pid_parent: int) -> bool:
    children = psutil.Process(pid_parent).children(recursive=True)
    return any(child.cmdline()[:1] == ["became-this"] for child in children)


def test_a_descendant_seen_before_its_exec_is_known_by_what_it_became(tmp_path):
    ready, go = tmp_path / "ready", tmp_path / "go"
    # `; exit` keeps bash from exec'ing python itself, so the child is a grandchild as in a run
    popen = subprocess.Popen(["bash", "-c", '"$@"; exit $?', "bash", sys.executable, "-c", CHILD, str(ready), str(go)],
                             start_new_session=True)
    tree = ProcessTree(popen)
    try:
        _wait(ready.exists, "the child started")
        tree.snapshot()
        assert tree.matching("became-this") == []
        go.touch()
        _wait(lambda: _execed(popen.pid), "the child exec'd")
        tree.snapshot()
        assert len(tree.matching("became-this")) == 1, tree.seen
        assert {proc.pid for proc in tree.alive()} >= set(tree.matching("became-this"))
    finally:
        tree.stop()
        sigkill(popen.pid, "process tree", group=True, purpose=CLEANUP)
        popen.wait(10)
