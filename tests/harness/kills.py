"""Every SIGKILL the tests send goes through `sigkill`, which records what it killed and whether
the signal landed; the suite's report (tests/conftest.py) counts them, so that a cut in crash
coverage shows in CI's report as fewer SIGKILLs landed.

A kill lands when a live process received it: a target already gone (ProcessLookupError) or
dead and not yet reaped (a zombie) was not killed. A kill a test makes on purpose is coverage;
a cleanup kill (a leftover killed in a `finally`, a teardown or after a timeout, so that the
next test starts clean) is counted apart. A `kill` fault point (etl/faults.py) is the job
SIGKILLing itself at the test's request: the harness notes it, when the exit code shows it
landed, with `fault_point_landed`.
"""
from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

ON_PURPOSE, CLEANUP = "on purpose", "cleanup"
SENT, FAULT_POINT = "sent by the tests", "the job's own, at a fault point"


@dataclass(frozen=True)
class Kill:
    what: str  # what was killed: "etl run", "DataNode", "YARN container", ...
    purpose: str  # ON_PURPOSE or CLEANUP
    landed: bool  # a live process received it
    by: str = SENT  # or FAULT_POINT


# Every SIGKILL of this process's tests, in order (as tests.harness.etl_process.FINISHED).
KILLS: list[Kill] = []


def sigkill(targets: int | Iterable[int], what: str, *, group: bool = False, purpose: str = ON_PURPOSE) -> bool:
    """SIGKILL a pid (a process group with `group`), or several at once as ONE kill of `what`
    (a process tree, a container's processes), and record it. Returns whether it landed: at
    least one target had a live process when the signal was sent."""
    wanted = [targets] if isinstance(targets, int) else list(targets)
    live = _live(wanted, group)
    landed = False
    for target in wanted:
        try:
            (os.killpg if group else os.kill)(target, signal.SIGKILL)
        except ProcessLookupError:
            continue
        landed = landed or target in live
    KILLS.append(Kill(what, purpose, landed))
    return landed


def fault_point_landed(what: str) -> None:
    """Record a `kill` fault point's SIGKILL, seen to have landed (the process exited -9)."""
    KILLS.append(Kill(what, ON_PURPOSE, True, FAULT_POINT))


def _live(targets: list[int], group: bool) -> set[int]:
    """The targets with a live (not zombie) process right now: a pid, or a group's members."""
    if not group:
        return {pid for pid in targets if _alive(_stat(Path(f"/proc/{pid}/stat")))}
    wanted, live = set(targets), set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            found = _stat(entry / "stat")
            if _alive(found) and found[1] in wanted:
                live.add(found[1])
    return live


def _alive(stat: tuple[str, int] | None) -> bool:
    return stat is not None and stat[0] not in "ZX"  # Z: a zombie, X: dead


def _stat(path: Path) -> tuple[str, int] | None:
    """(state, process group) from /proc/<pid>/stat; None if the process is gone."""
    try:
        text = path.read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # the command, in parentheses, may hold spaces
    return fields[0], int(fields[2])
