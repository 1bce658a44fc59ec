"""One `etl <command>` subprocess, driven and killed for real (no mocks), and its result.

Usable without pytest. Every run gets its own session/process group, its output in files
(removed when this process exits), and a thread that notes every descendant, so that a kill
takes the whole tree down like a lost machine and no orphan of a dead run lives on.
"""
from __future__ import annotations

import atexit
import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import psutil

from tests.harness.kills import CLEANUP, ON_PURPOSE, fault_point_landed, sigkill
from tests.harness.paths import ETL
from tests.harness.warehouse_files import TEMP_PREFIX

FAULT_ENV = ("ETL_FAULT_POINT", "ETL_FAULT_ACTION", "ETL_FAULT_PGID")
# Every `etl` process this process waited for: (command, seconds from start to exit). The suite's
# report sums them by command (tests/conftest.py): most of an integration test's time is these.
FINISHED: list[tuple[str, float]] = []
# The reapers of clean runs (exit 0, no fault point), which wait for the run's JVM to finish
# exiting (about 0.5 s) while the test goes on: (the run, its reaper, what it had to kill).
_REAPERS: list[tuple[str, threading.Thread, list[str]]] = []


class EtlProcess:
    """One `etl <command>` subprocess in its own session/process group, with its output in files.

    A background thread keeps a list of every descendant it has seen (the Spark JVM, the
    PySpark daemon and its workers, executor JVMs), because PySpark's worker daemon puts
    itself in a process group of its own: `kill()` SIGKILLs all those groups at once, like a
    lost machine, and `reap()` makes sure no orphan of a dead run keeps writing behind the
    next run's back. Every kill is recorded (tests/harness/kills.py), and so is a `kill` fault
    point's, once the exit code shows it landed.
    """

    _exit_noted = False  # class attributes: tests/perf/crash_compare.PeerProcess skips __init__
    _kill_landed = False

    def __init__(self, config: Path | str, command: str = "run", *args: str, fault: str | None = None,
                 action: str | None = None, env: dict | None = None, workdir: Path | None = None,
                 venv: Path | None = None):
        """`venv`: another venv whose `etl` and python run it (the Spark 3.5 line's), not this one's."""
        self.config, self.command = Path(config), command
        self.fault, self.action = fault, action
        python = str(Path(venv) / "bin" / "python") if venv else sys.executable
        etl = str(Path(venv) / "bin" / "etl") if venv else ETL
        run_env = {**os.environ, "PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python}
        for key in FAULT_ENV:
            run_env.pop(key, None)
        if fault:
            run_env["ETL_FAULT_POINT"] = fault
        if action:
            run_env["ETL_FAULT_ACTION"] = action
        run_env.update(env or {})
        self._dir = Path(tempfile.mkdtemp(prefix=f"etl-{command.replace(' ', '-')}-", dir=workdir or _runs_root()))
        self._output: tuple[str, str] | None = None
        self.stdout_path, self.stderr_path = self._dir / "stdout", self._dir / "stderr"
        with open(self.stdout_path, "ab") as out, open(self.stderr_path, "ab") as err:
            self.started = time.monotonic()
            # `command` may be a sub-command's two words ("rollup rebuild")
            self.popen = subprocess.Popen(die_with_us([etl, *command.split(), "--config", str(config), *args]),
                                          env=run_env, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                          start_new_session=True)
        self.pid = self.popen.pid
        self.ended: float | None = None
        self.tree = ProcessTree(self.popen)

    # -- process tree ---------------------------------------------------------------------
    @property
    def seen(self) -> dict[int, tuple[float, str]]:
        return self.tree.seen

    def _snapshot(self) -> None:
        self.tree.snapshot()

    def _alive_descendants(self) -> list[psutil.Process]:
        return self.tree.alive()

    def descendants_matching(self, word: str) -> list[int]:
        return self.tree.matching(word)

    @property
    def name(self) -> str:
        """What a kill of it killed, in the suite's report."""
        return f"etl {self.command}"

    def kill(self, purpose: str = ON_PURPOSE) -> bool:
        """SIGKILL the job's process group and every group its descendants live in, at once: one
        kill, recorded with its `purpose` (CLEANUP: a leftover killed in a `finally`).
        Returns False when the job had already exited (nothing was killed)."""
        self._snapshot()
        if self.popen.poll() is not None:
            return False
        groups = {self.pid}
        for proc in self._alive_descendants():
            try:
                groups.add(os.getpgid(proc.pid))
            except OSError:
                pass
        groups.discard(os.getpgrp())  # never our own group
        self._kill_landed = sigkill(groups, self.name, group=True, purpose=purpose) or self._kill_landed
        return True

    def reap(self, grace: float = 5.0) -> list[str]:
        """After the job ended: wait up to `grace` seconds for its orphans (PySpark daemon,
        workers, JVMs of a SIGKILLed driver) to exit on their own, then SIGKILL the rest.
        Returns the command lines of those that had to be killed."""
        deadline = time.monotonic() + grace
        while True:
            alive = self._alive_descendants()
            if not alive or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        killed = []
        for proc in alive:
            killed.append(_short_cmdline(proc))
            sigkill(proc.pid, f"{self.name}'s leftover", purpose=CLEANUP)
        return killed

    def reap_in_background(self, grace: float = 10.0) -> None:
        """reap(grace) on a thread of its own: `settled_reapers()` waits for it and says what it had
        to kill. For a run that exited 0 without a fault point, whose every task has ended: what
        is left is its JVM finishing its exit (about 0.5 s), which nothing the test does next waits
        on. The grace is long, because what outlives it fails the test: a JVM still alive 10 s
        after its driver exited is a fault of the job, not of a loaded machine."""
        killed: list[str] = []
        reaper = threading.Thread(target=lambda: killed.extend(self.reap(grace)), name=f"reap-{self.pid}", daemon=True)
        reaper.start()
        _REAPERS.append((f"etl {self.command} --config {self.config}", reaper, killed))

    # -- signals --------------------------------------------------------------------------
    def stop(self) -> None:
        """SIGSTOP the driver (the Python process that holds the ZooKeeper session) only."""
        os.kill(self.pid, signal.SIGSTOP)

    def cont(self) -> None:
        try:
            os.kill(self.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass

    # -- results --------------------------------------------------------------------------
    def poll(self) -> int | None:
        code = self.popen.poll()
        if code is not None and self.ended is None:
            self.ended = time.monotonic()
        return code

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the exit; on timeout kill everything and raise TimeoutError with the output."""
        try:
            code = self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill(CLEANUP)
            self.popen.wait(30)
            self.reap(0)
            raise TimeoutError(f"etl {self.command} (fault {self.fault} {self.action}) did not exit within "
                               f"{timeout}s; killed it.\n{self.describe()}") from None
        self.poll()
        self.tree.stop()
        FINISHED.append((self.command, self.seconds))
        self._note_fault_point_kill(code)
        return code

    def _note_fault_point_kill(self, code: int) -> None:
        """A `kill` fault point SIGKILLs the job from inside: recorded once, when it exited -9
        with no kill of ours landed."""
        if self._exit_noted:
            return
        self._exit_noted = True
        if code == -signal.SIGKILL and self.fault and self.action in (None, "kill") and not self._kill_landed:
            fault_point_landed(self.name)

    def wait_until(self, predicate: Callable[[], bool], timeout: float, what: str, poll: float = 0.1) -> float:
        """Poll `predicate` until true; fail (with the job's output) if the job exits first or
        `timeout` passes. Returns the seconds waited."""
        started = time.monotonic()
        while not predicate():
            if self.poll() is not None:
                raise AssertionError(f"etl {self.command} exited ({self.returncode}) before {what}\n"
                                     f"{self.describe()}")
            if time.monotonic() - started > timeout:
                raise TimeoutError(f"{what}: not reached within {timeout}s\n{self.describe()}")
            time.sleep(poll)
        return time.monotonic() - started

    def sleeping_writer(self, name_part: str) -> int | None:
        """The pid of a descendant (a PySpark worker) that has a temp file whose name contains
        `name_part` open and whose main thread sleeps in time.sleep (a `sleep:` fault point
        action), i.e. a task paused mid-write; None if there is none right now."""
        self._snapshot()
        for proc in self._alive_descendants():
            try:
                holding = any(TEMP_PREFIX in Path(f.path).name and name_part in Path(f.path).name
                              for f in proc.open_files())
                if holding and Path(f"/proc/{proc.pid}/wchan").read_text().strip() in ("hrtimer_nanosleep",
                                                                                       "do_nanosleep"):
                    return proc.pid
            except (psutil.Error, OSError):
                pass
        return None

    @property
    def returncode(self) -> int | None:
        return self.popen.returncode

    @property
    def seconds(self) -> float:
        return (self.ended or time.monotonic()) - self.started

    @property
    def stdout(self) -> str:
        return self._output[0] if self._output else self.stdout_path.read_text(errors="replace")

    @property
    def stderr(self) -> str:
        return self._output[1] if self._output else self.stderr_path.read_text(errors="replace")

    def close(self) -> None:
        """After the exit: keep the output in memory and delete its files."""
        if self._output is None and self.poll() is not None:
            self._output = (self.stdout, self.stderr)
            shutil.rmtree(self._dir, ignore_errors=True)

    def describe(self, tail: int = 4000) -> str:
        return (f"--- etl {self.command} --config {self.config} fault={self.fault} action={self.action} "
                f"rc={self.returncode} after {self.seconds:.1f}s\n--- stdout:\n{self.stdout[-tail:]}\n"
                f"--- stderr (tail):\n{self.stderr[-tail:]}")


class ProcessTree:
    """Every descendant of a process that a background thread has seen, with its start time and
    short command line, noted every 0.25 s while the process lives (and on each snapshot())."""

    def __init__(self, popen: subprocess.Popen):
        self.popen, self.pid = popen, popen.pid
        self.seen: dict[int, tuple[float, str]] = {}  # pid -> (create_time, short command line)
        self._stop_tracking = threading.Event()
        self._lock = threading.Lock()
        self._tracker = threading.Thread(target=self._track, name=f"track-{self.pid}", daemon=True)
        self._tracker.start()

    def _track(self) -> None:
        while not self._stop_tracking.is_set():
            self.snapshot()
            if self.popen.poll() is not None:
                return
            self._stop_tracking.wait(0.25)

    def stop(self) -> None:
        self._stop_tracking.set()

    def snapshot(self) -> None:
        """Note new descendants, and the command line of known ones again: a child seen between
        its fork and its exec (a JVM's jspawnhelper) is then known by the program it became. A
        pid reused by a later process keeps its first entry; an exited one, its last."""
        try:
            children = psutil.Process(self.pid).children(recursive=True)
        except psutil.Error:
            return
        with self._lock:
            for child in children:
                try:
                    created, command = child.create_time(), _short_cmdline(child)
                except psutil.Error:
                    continue
                known = self.seen.get(child.pid)
                if known is None or (known[0] == created and command != "?"):  # "?": a zombie's is gone
                    self.seen[child.pid] = (created, command)

    def alive(self) -> list[psutil.Process]:
        alive = []
        with self._lock:
            items = list(self.seen.items())
        for pid, (created, _) in items:
            try:
                proc = psutil.Process(pid)
                if proc.create_time() == created and proc.status() != psutil.STATUS_ZOMBIE:
                    alive.append(proc)
            except psutil.Error:
                pass
        return alive

    def matching(self, word: str) -> list[int]:
        with self._lock:
            return [pid for pid, (_, cmd) in self.seen.items() if word in cmd]


def die_with_us(command: list[str]) -> list[str]:
    """`command` wrapped so that the kernel SIGKILLs it when this process dies (setpriv
    --pdeathsig, util-linux): a test session killed by a timeout must not leave runs paused
    in a sleep fault point, SIGSTOPped drivers or private services behind. The death signal
    follows the creating *thread*, so it is only set up from the main thread."""
    setpriv = shutil.which("setpriv")
    if setpriv is None or threading.current_thread() is not threading.main_thread():
        return command
    return [setpriv, "--pdeathsig", "KILL", "--", *command]


@functools.cache
def _runs_root() -> Path:
    """Each run's stdout/stderr files live here; removed when this process exits."""
    root = Path(tempfile.mkdtemp(prefix="etl-crash-runs-"))
    atexit.register(shutil.rmtree, root, True)
    return root


def _short_cmdline(proc: psutil.Process) -> str:
    try:
        cmd = proc.cmdline()
    except psutil.Error:
        return "?"
    words = [w for w in cmd if not w.startswith("-")]
    main = next((w for w in words if "." in w and w[0].isalpha() and "/" not in w), None)  # a Java main class
    return " ".join(filter(None, [Path(cmd[0]).name if cmd else "?", main or " ".join(cmd[1:3])]))


@dataclass
class Finished:
    """A finished etl command, like subprocess.CompletedProcess plus timing and orphans."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float
    orphans_killed: list[str]
    process: EtlProcess

    def describe(self) -> str:
        return self.process.describe()


def run_etl(config: Path | str, *args: str, command: str = "run", fault: str | None = None,
            action: str | None = None, env: dict | None = None, timeout: float = 600,
            reap_now: bool = False, venv: Path | None = None) -> Finished:
    """Run `etl <command>` to its end (in its own process group); reap whatever it left: at once
    after a failure, a kill or a fault point (or with `reap_now`), else in the background
    (`settled_reapers`), as its JVM finishes exiting while the test goes on."""
    proc = EtlProcess(config, command, *args, fault=fault, action=action, env=env, venv=venv)
    code = proc.wait(timeout)
    orphans: list[str] = []
    if code == 0 and fault is None and action is None and not reap_now:
        proc.reap_in_background()
    else:
        orphans = proc.reap(grace=5.0 if code < 0 else 2.0)
    proc.close()
    return Finished(code, proc.stdout, proc.stderr, proc.seconds, orphans, proc)


@dataclass(frozen=True)
class Takeover:
    """What take_over_past_its_session saw."""

    second: Finished  # the run that took the lock over
    first_code: int  # the stopped run's exit, once let go
    session: int  # the stopped run's ZooKeeper session id
    lock_gone_after: float  # seconds from the SIGSTOP to its lock's end


def take_over_past_its_session(first: EtlProcess, zk, config: Path | str) -> Takeover:
    """SIGSTOP the running `first` (its driver holds the ZooKeeper session: no more pings, the
    server expires it), wait for its lock to go, run the job again, then let `first` go on and
    wait for it. Should anything fail meanwhile, `first` is killed."""
    from tests.harness.state import lock_znode, wait_for_lock_release
    session = zk.exists(lock_znode(config)).ephemeralOwner
    try:
        first.stop()
        gone_after = wait_for_lock_release(zk, config)
        second = run_etl(config)
    except BaseException:
        first.kill(CLEANUP)
        raise
    finally:
        first.cont()
    code = first.wait(300)
    first.reap()
    return Takeover(second, code, session, gone_after)


def settled_reapers() -> list[str]:
    """Wait for the background reapers (run_etl), and return what they had to SIGKILL: processes
    that outlived a clean run by their grace period (10 s), which should never happen."""
    found = []
    while _REAPERS:
        run, reaper, killed = _REAPERS.pop()
        reaper.join()
        found += [f"{run}: {orphan}" for orphan in killed]
    return found


def etl_command(config: Path | str, command: str, *args: str, timeout: float = 120) -> Finished:
    """`etl <command> --config F args...` to its end (run_etl with the command first)."""
    return run_etl(config, *args, command=command, timeout=timeout)
