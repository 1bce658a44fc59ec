"""Foreign load, and what the Spark Python workers hold: the gate that waits for a quiet
machine, and the monitor around one measurement (wall time, CPU by whom, worker RSS)."""
from __future__ import annotations

import os
import threading
import time

from tests.harness.paths import REPO
from tests.perf.common import say


def loadavg() -> tuple[float, float, float]:
    with open("/proc/loadavg") as f:
        one, five, fifteen = f.read().split()[:3]
    return float(one), float(five), float(fifteen)


class LoadGate:
    """Waits before each measurement until the 1-minute load is below the threshold; the
    waiting has one budget for the whole run, after which it measures anyway (and says so)."""

    def __init__(self, threshold: float, budget: float):
        self.threshold, self.budget, self.waited = threshold, budget, 0.0
        self.gave_up = False

    def wait(self, what: str) -> dict:
        load = loadavg()
        if load[0] >= self.threshold and self.waited < self.budget:
            say(f"load {load[0]:.2f} >= {self.threshold}: waiting before {what} "
                f"(up to {self.budget - self.waited:.0f}s more of the --max-wait budget)")
        while load[0] >= self.threshold and self.waited < self.budget:
            time.sleep(5)
            self.waited += 5
            load = loadavg()
        quiet = load[0] < self.threshold
        if not quiet and not self.gave_up:
            self.gave_up = True
            say(f"load still {load[0]:.2f} after waiting {self.waited:.0f}s: measuring anyway")
        return {"loadavg_before": list(load), "quiet": quiet}


_CLK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _proc_table() -> dict[int, tuple[int, str, float]]:
    """{pid: (ppid, comm, cpu seconds incl. reaped children)} from /proc/*/stat."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                raw = f.read().decode(errors="replace")
        except OSError:
            continue
        comm_end = raw.rfind(")")
        rest = raw[comm_end + 2:].split()
        # fields after comm: state ppid ... utime(12) stime(13) cutime(14) cstime(15)
        cpu = (int(rest[11]) + int(rest[12]) + int(rest[13]) + int(rest[14])) / _CLK
        table[int(name)] = (int(rest[1]), raw[raw.find("(") + 1:comm_end], cpu)
    return table


def _descendants(table, root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, (ppid, _comm, _cpu) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        found.add(pid)
        todo.extend(children.get(pid, ()))
    return found


def _stack_pids(table) -> set[int]:
    """The local stack's services (ZooKeeper, Kafka, the metastore) and their children: they
    work for this benchmark, but for every other user of the stack too."""
    pids = set()
    for name in ("zookeeper", "kafka", "metastore"):
        try:
            pid = int((REPO / ".stack" / f"{name}.pid").read_text().strip())
        except (OSError, ValueError):
            continue
        if pid in table:
            pids |= _descendants(table, pid)
    return pids


def _busy_cpu_seconds() -> float:
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / _CLK


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _self_cpu(pid: int) -> float | None:
    """A process's own CPU seconds (utime + stime), without its reaped children's."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            rest = f.read().decode(errors="replace").rpartition(")")[2].split()
        return (int(rest[11]) + int(rest[12])) / _CLK
    except (OSError, IndexError, ValueError):
        return None


def _rss(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return None


class Monitor:
    """Around one measurement: wall time, the load average, the CPU used by processes outside
    this benchmark's process tree, and (sample_workers) the RSS of the Spark Python workers:
    the processes forked by `python -m pyspark.daemon`, sampled every `interval` seconds. With
    sample_tree, also the summed RSS of this benchmark's whole process tree (driver JVM, Python
    workers, this process) and of the processes started during the measurement (a job run as a
    process, with its JVM and workers); the CPU of this tree is then the sum of each process's own
    CPU, read every `interval` seconds while it lives: a job's JVM that its process does not reap
    would otherwise be counted as a foreign process (a process that exits loses at most one
    interval of its CPU)."""

    def __init__(self, sample_workers: bool = False, interval: float = 0.05, rescan: float = 0.25,
                 sample_tree: bool = False):
        self.sample_workers, self.interval, self.rescan = sample_workers, interval, rescan
        self.sample_tree = sample_tree
        self.peak_tree_rss = 0  # the whole process tree at one instant
        self.peak_new_rss = 0  # the processes started during the measurement, at one instant
        self.peak_worker_rss = 0  # the largest single worker
        self.peak_total_rss = 0  # daemon + all workers at one instant
        self.baseline_worker_rss = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "Monitor":
        self.load_before = loadavg()
        table = _proc_table()
        self._own_before = {pid: table[pid][2] for pid in _descendants(table, os.getpid()) if pid in table}
        self._stack_before = {pid: table[pid][2] for pid in _stack_pids(table)}
        self._busy_before = _busy_cpu_seconds()
        self._tree: set[int] = set()
        self._old = _descendants(table, os.getpid())
        self._cpu_before = {pid: _self_cpu(pid) or 0.0 for pid in self._old} if self.sample_tree else {}
        self._cpu_seen: dict[int, float] = {}
        self._workers: set[int] = set()
        self._daemons: set[int] = set()
        if self.sample_workers:
            self._workers, self._daemons = self._find_workers(table)
            self.baseline_worker_rss = max((_rss(p) or 0 for p in self._workers), default=0)
        if self.sample_workers or self.sample_tree:
            self._thread = threading.Thread(target=self._sample, name="bench-rss", daemon=True)
            self._thread.start()
        self.started = time.monotonic()
        return self

    def __exit__(self, *exc) -> None:
        self.seconds = time.monotonic() - self.started
        self._stop.set()
        if self._thread:
            self._thread.join()
        busy = _busy_cpu_seconds() - self._busy_before
        table = _proc_table()
        own = 0.0
        for pid in _descendants(table, os.getpid()):
            if pid in table:
                own += table[pid][2] - self._own_before.get(pid, 0.0)
        if self.sample_tree:
            self._read_tree_cpu(_descendants(table, os.getpid()))
            own = sum(cpu - self._cpu_before.get(pid, 0.0) for pid, cpu in self._cpu_seen.items())
        stack = sum(table[pid][2] - self._stack_before.get(pid, 0.0) for pid in _stack_pids(table))
        self.own_cores = own / self.seconds if self.seconds else 0.0
        self.stack_cores = stack / self.seconds if self.seconds else 0.0
        self.foreign_cores = max(0.0, busy - own - stack) / self.seconds if self.seconds else 0.0
        self.load_after = loadavg()

    @staticmethod
    def _find_workers(table) -> tuple[set[int], set[int]]:
        ours = _descendants(table, os.getpid())
        daemons = {pid for pid in ours if "pyspark.daemon" in _cmdline(pid) and "pyspark.daemon" not in
                   _cmdline(table[pid][0])}
        workers = set()
        for daemon in daemons:
            workers |= _descendants(table, daemon) - {daemon}
        return workers, daemons

    def _sample(self) -> None:
        next_scan = 0.0
        while not self._stop.is_set():
            now = time.monotonic()
            if now >= next_scan:
                table = _proc_table()
                if self.sample_workers:
                    self._workers, self._daemons = self._find_workers(table)
                if self.sample_tree:
                    self._tree = _descendants(table, os.getpid())
                next_scan = now + self.rescan
            if self.sample_tree:
                self._read_tree_cpu(self._tree)
                tree = {pid: _rss(pid) or 0 for pid in self._tree}
                self.peak_tree_rss = max(self.peak_tree_rss, sum(tree.values()))
                self.peak_new_rss = max(self.peak_new_rss, sum(v for pid, v in tree.items() if pid not in self._old))
            sizes = [s for s in (_rss(p) for p in self._workers) if s]
            if sizes:
                self.peak_worker_rss = max(self.peak_worker_rss, max(sizes))
            total = sum(sizes) + sum(_rss(p) or 0 for p in self._daemons)
            self.peak_total_rss = max(self.peak_total_rss, total)
            self.samples += 1
            self._stop.wait(self.interval)

    def _read_tree_cpu(self, pids) -> None:
        for pid in pids:
            cpu = _self_cpu(pid)
            if cpu is not None:
                self._cpu_seen[pid] = cpu

    def to_json(self) -> dict:
        out = {"seconds": self.seconds, "loadavg_before": list(self.load_before),
               "loadavg_after": list(self.load_after),
               "foreign_cpu_cores": round(self.foreign_cores, 3), "own_cpu_cores": round(self.own_cores, 3),
               "stack_cpu_cores": round(self.stack_cores, 3)}
        if self.sample_workers:
            out.update(peak_worker_rss_mb=self.peak_worker_rss / 2**20,
                       peak_workers_total_rss_mb=self.peak_total_rss / 2**20,
                       worker_rss_before_mb=self.baseline_worker_rss / 2**20, rss_samples=self.samples)
        if self.sample_tree:
            out.update(peak_tree_rss_mb=self.peak_tree_rss / 2**20, peak_new_processes_rss_mb=self.peak_new_rss / 2**20,
                       rss_samples=self.samples)
        return out
