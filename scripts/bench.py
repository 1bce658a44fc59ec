#!/usr/bin/env python
"""Benchmark of the ETL against the local stack (issue 5): throughput, memory, fixed cost, scale.

A benchmark, not a test: it prints figures (and checks that every run loaded exactly what it
should), but never fails because something was slow. Needs the local stack
(scripts/local-stack up) and the venv (scripts/setup).

    .venv/bin/python scripts/bench.py                      # 1M JSON records, 4 partitions, local[2], 3 repetitions
    .venv/bin/python scripts/bench.py --memory-check       # peak Python worker RSS: a 1M vs a 10M partition-batch
    .venv/bin/python scripts/bench.py --partition-scaling 10,100,1000
    .venv/bin/python scripts/bench.py --json --json-out bench.json

The default run produces --records records into a fresh topic and measures, on exactly the
same offset ranges, in one Spark session (local[P], one task per Kafka partition), each
repeated --repeat times and interleaved so that a burst of foreign load hits them alike:

  drain       Spark tasks that consume the ranges with confluent-kafka and count (the floor)
  drain+chunk the same through etl.source.kafka.read_range (the ETL's reader, no decoding)
  full batch  the real job (etl.job.runner.run_job) on a fresh ZooKeeper root and a fresh Hive
              table: plan, tasks (read, decode, write, rename), check, register, commit
  row-by-row  per-record json.loads in the tasks, spark.createDataFrame(rdd), DataFrame writer

then the fixed cost of an `etl run` with nothing new (the CLI, a fresh process) and, for
reference, the Spark session start-up. During the full batch it samples, every 50 ms, the RSS
of the Spark Python workers (the pyspark daemon's children).

Foreign load: before every timed measurement it waits (at most --max-wait seconds in all)
until the 1-minute load average is below --load-threshold, and records the load average and
the CPU that processes outside this benchmark used while it measured.
"""
from __future__ import annotations

import argparse
import configparser
import contextlib
import io
import json
import logging
import os
import platform
import shutil
import statistics
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCHEMAS = {"json": REPO / "warehouse_schema" / "events.sql", "access_log": REPO / "warehouse_schema" / "access_log.sql"}
ETL_CLI = str(Path(sys.executable).with_name("etl"))
ZK_BENCH_ROOT = "/etl-bench"
WORK_ROOT = Path(os.environ.get("ETL_BENCH_DIR", "/tmp/kafka-hive-etl-bench"))
MB = 1_000_000

# As tests/kafka_helpers.PRODUCER_CONFIG: big batches, so that 1M small records take seconds.
PRODUCER_CONFIG = {
    "linger.ms": 5,
    "batch.size": 4_000_000,
    "batch.num.messages": 100_000,
    "message.max.bytes": 16_000_000,
    "queue.buffering.max.messages": 2_000_000,
    "queue.buffering.max.kbytes": 2_000_000,
    "enable.idempotence": True,
}

log = logging.getLogger("bench")


def say(message: str) -> None:
    """Progress goes to stderr, so that --json on stdout stays one clean object."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# The local stack
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Stack:
    zk_hosts: str
    bootstrap: str
    metastore: str


def local_stack() -> Stack:
    """Endpoints from the environment, else from .stack/env (written by scripts/local-stack)."""
    values = {}
    env_file = REPO / ".stack" / "env"
    if env_file.exists():
        for line in env_file.read_text().splitlines():
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    values.update({k: v for k, v in os.environ.items() if k.startswith("ETL_")})
    stack = Stack(
        zk_hosts=values.get("ETL_ZK_HOSTS") or f"127.0.0.1:{values.get('ETL_ZK_PORT', 2181)}",
        bootstrap=values.get("ETL_KAFKA_BOOTSTRAP") or f"127.0.0.1:{values.get('ETL_KAFKA_PORT', 9092)}",
        metastore=values.get("ETL_METASTORE_URI") or f"thrift://127.0.0.1:{values.get('ETL_METASTORE_PORT', 9083)}",
    )
    import socket
    for what, address in (("ZooKeeper", stack.zk_hosts.split(",")[0]), ("Kafka", stack.bootstrap.split(",")[0]),
                          ("metastore", stack.metastore.removeprefix("thrift://"))):
        host, _, port = address.rpartition(":")
        try:
            socket.create_connection((host, int(port)), timeout=3).close()
        except OSError:
            sys.exit(f"bench: {what} does not answer at {address}; start the local stack: scripts/local-stack up")
    return stack


# ---------------------------------------------------------------------------------------------
# Test data
# ---------------------------------------------------------------------------------------------

def value_maker(decoder: str, record_bytes: int):
    """make(i) -> bytes: record i, padded to record_bytes when shorter.

    json: tests/pipeline_helpers.event(i) (same fields and formatting, built without json.dumps
    so that 10M records are quick), plus a "pad" field the decoder ignores.
    access_log: '<date> <time> <LEVEL> <message>' lines, padded with text in the message.
    """
    if decoder == "json":
        def make(i: int) -> bytes:
            head = (f'{{"event_id": {i}, "user_id": "u{i % 7}", "action": "click", "amount": {i / 10!r}, '
                    f'"ts": "2026-11-21 10:00:00", "ok": {"true" if i % 2 == 0 else "false"}')
            room = record_bytes - len(head) - len(', "pad": ""}')
            return (head + (f', "pad": "{"x" * room}"}}' if room > 0 else "}")).encode()
    else:
        levels = ("INFO", "INFO", "INFO", "WARN", "ERROR")

        def make(i: int) -> bytes:
            text = f"2026-11-21 10:{i // 60 % 60:02d}:{i % 60:02d} {levels[i % 5]} request served #{i}"
            room = record_bytes - len(text) - 1
            return (text + (" " + "x" * room if room > 0 else "")).encode()
    return make


def create_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 60.0) -> None:
    """Create the topic and wait until its metadata shows every partition with a leader."""
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                                  operation_timeout=timeout)
    futures[topic].result(timeout=timeout)
    deadline = time.monotonic() + timeout
    while True:
        found = admin.list_topics(topic, timeout=10).topics.get(topic)
        if (found is not None and found.error is None and len(found.partitions) == partitions
                and all(p.error is None and p.leader >= 0 for p in found.partitions.values())):
            return
        if time.monotonic() > deadline:
            shown = None if found is None else len(found.partitions)
            raise RuntimeError(f"topic {topic}: metadata shows {shown} of {partitions} partitions after {timeout}s")
        time.sleep(0.2)


def delete_topics(bootstrap: str, topics: list[str]) -> None:
    if not topics:
        return
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive the futures
    for future in admin.delete_topics(topics, operation_timeout=30).values():
        try:
            future.result(timeout=30)
        except Exception as exc:  # the broker keeps topics in memory only; a leftover is harmless
            say(f"could not delete a topic: {exc}")


def produce(bootstrap: str, topic: str, counts: dict[int, int], make, first_ids: dict[int, int] | None = None) -> dict:
    """Produce counts[p] records to each partition p, streaming (nothing held in memory).

    Tansu's end-offset quirk (shared/notes/local-stack.md): it reports a partition's end as the
    base offset of its last record batch + 1. So each partition's last record is sent as a
    batch of its own, after a flush; then the end offset is exact.
    """
    from confluent_kafka import Producer
    errors: list[str] = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(f"partition {msg.partition()}: {err}")

    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER_CONFIG, "on_delivery": on_delivery})
    started = time.monotonic()
    total_bytes = 0
    first_ids = first_ids or {}

    def send(partition: int, value: bytes) -> None:
        while True:
            try:
                producer.produce(topic, value, partition=partition)
                return
            except BufferError:  # the local queue is full: let deliveries drain
                producer.poll(0.05)

    def flush() -> None:
        left = producer.flush(300)
        if left:
            raise RuntimeError(f"{left} records to {topic} not delivered within 300s")

    base = {p: first_ids.get(p, sum(counts[q] for q in counts if q < p)) for p in counts}
    for p, n in counts.items():
        for i in range(base[p], base[p] + n - 1):
            value = make(i)
            total_bytes += len(value)
            send(p, value)
        producer.poll(0)
    flush()
    for p, n in counts.items():
        if n:
            value = make(base[p] + n - 1)
            total_bytes += len(value)
            send(p, value)
    flush()
    if errors:
        raise RuntimeError(f"{len(errors)} records to {topic} failed, e.g. {errors[:3]}")
    return {"records": sum(counts.values()), "bytes": total_bytes, "seconds": time.monotonic() - started}


def watermarks(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    """{partition: (low, high)}, asked in two batched ListOffsets requests."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec
    admin = AdminClient({"bootstrap.servers": bootstrap})
    parts = sorted(admin.list_topics(topic, timeout=10).topics[topic].partitions)
    marks = {}
    for spec, index in ((OffsetSpec.earliest(), 0), (OffsetSpec.latest(), 1)):
        futures = admin.list_offsets({TopicPartition(topic, p): spec for p in parts}, request_timeout=30)
        for tp, future in futures.items():
            marks.setdefault(tp.partition, [0, 0])[index] = future.result().offset
    return {p: tuple(marks[p]) for p in parts}


def produce_checked(bootstrap: str, topic: str, counts: dict[int, int], make, start: dict[int, int] | None = None,
                    first_ids: dict[int, int] | None = None) -> dict:
    """produce(), then check that the broker's end offsets are exactly start + count."""
    result = produce(bootstrap, topic, counts, make, first_ids)
    marks = watermarks(bootstrap, topic)
    start = start or {}
    wrong = {p: marks[p] for p, n in counts.items() if marks[p][1] != start.get(p, 0) + n}
    if wrong:
        raise RuntimeError(f"{topic}: end offsets after producing are not exact: {dict(list(wrong.items())[:5])}")
    return {**result, "watermarks": marks}


# ---------------------------------------------------------------------------------------------
# Foreign load, and what the Spark Python workers hold
# ---------------------------------------------------------------------------------------------

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
    """The local stack's services (ZooKeeper, Tansu, the metastore) and their children: they
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


def _rss(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return None


class Monitor:
    """Around one measurement: wall time, the load average, the CPU used by processes outside
    this benchmark's process tree, and (sample_workers) the RSS of the Spark Python workers:
    the processes forked by `python -m pyspark.daemon`, sampled every `interval` seconds."""

    def __init__(self, sample_workers: bool = False, interval: float = 0.05, rescan: float = 0.25):
        self.sample_workers, self.interval, self.rescan = sample_workers, interval, rescan
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
        if self.sample_workers:
            self._workers, self._daemons = self._find_workers(table)
            self.baseline_worker_rss = max((_rss(p) or 0 for p in self._workers), default=0)
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
                self._workers, self._daemons = self._find_workers(_proc_table())
                next_scan = now + self.rescan
            sizes = [s for s in (_rss(p) for p in self._workers) if s]
            if sizes:
                self.peak_worker_rss = max(self.peak_worker_rss, max(sizes))
            total = sum(sizes) + sum(_rss(p) or 0 for p in self._daemons)
            self.peak_total_rss = max(self.peak_total_rss, total)
            self.samples += 1
            self._stop.wait(self.interval)

    def to_json(self) -> dict:
        out = {"seconds": self.seconds, "loadavg_before": list(self.load_before), "loadavg_after": list(self.load_after),
               "foreign_cpu_cores": round(self.foreign_cores, 3), "own_cpu_cores": round(self.own_cores, 3),
               "stack_cpu_cores": round(self.stack_cores, 3)}
        if self.sample_workers:
            out.update(peak_worker_rss_mb=self.peak_worker_rss / 2**20, peak_workers_total_rss_mb=self.peak_total_rss / 2**20,
                       worker_rss_before_mb=self.baseline_worker_rss / 2**20, rss_samples=self.samples)
        return out


# ---------------------------------------------------------------------------------------------
# The job's config, and timing the real job phase by phase
# ---------------------------------------------------------------------------------------------

def write_ini(path: Path, *, stack: Stack, name: str, topics: list[str], zk_root: str, warehouse: Path,
              database: str, table: str, decoder: str, max_records: int, parallelism: int,
              job_extra: dict | None = None) -> Path:
    sections = {
        "job": {"name": name, "max_records_per_partition": str(max_records), "starting_offsets": "earliest",
                "on_offset_out_of_range": "fail", "max_rejected_ratio": "0.01", "decoder": decoder,
                **(job_extra or {})},
        "kafka": {"bootstrap.servers": stack.bootstrap, "topics": ",".join(topics), "fetch_timeout_seconds": "30"},
        "zookeeper": {"hosts": stack.zk_hosts, "root": zk_root, "session_timeout_seconds": "10"},
        "warehouse": {"url": f"file://{warehouse}"},
        "hive": {"metastore": stack.metastore, "database": database, "table": table, "schema": str(SCHEMAS[decoder])},
        "retry": {"attempts": "3", "initial_wait_seconds": "0.2", "max_wait_seconds": "2"},
        "spark": {"spark.master": f"local[{parallelism}]", "spark.ui.enabled": "false",
                  "spark.sql.shuffle.partitions": str(parallelism)},
    }
    parser = configparser.ConfigParser(interpolation=None, delimiters=("=",))
    parser.optionxform = str
    parser.read_dict(sections)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        parser.write(f)
    return path


@dataclass
class Call:
    name: str
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start


class PhaseTimer:
    """Times the job's steps by wrapping its methods in this process for the duration of one
    run (etl/ itself is not changed). The tasks run on executors and are timed as a whole."""

    TARGETS = (
        ("etl.state.store", "ZkStateStore", ("connect", "acquire_lock", "release_lock", "open_batch", "batch_ids",
                                          "committed_offsets", "write_plan", "advance", "commit", "prune_batches")),
        ("etl.source.kafka", "KafkaMetadata", ("__init__", "partitions", "watermarks")),
        ("etl.job.driver", "Job", ("_plan", "_run_tasks", "_check_files", "_sweep_temp_files")),
        ("etl.hive.registrar", "HiveRegistrar", ("ensure_tables", "add_partition")),
        ("etl.hive.spark", None, ("build_spark",)),
    )

    def __init__(self):
        self.calls: list[Call] = []

    @contextlib.contextmanager
    def installed(self):
        import importlib
        restore = []
        for module_name, class_name, names in self.TARGETS:
            module = importlib.import_module(module_name)
            owner = getattr(module, class_name) if class_name else module
            for name in names:
                original = owner.__dict__[name] if class_name else getattr(module, name)
                label = f"{class_name}.{name}" if class_name else name
                setattr(owner, name, self._wrap(label, original))
                restore.append((owner, name, original))
        try:
            yield self
        finally:
            for owner, name, original in reversed(restore):
                setattr(owner, name, original)

    def _wrap(self, label: str, original):
        calls = self.calls

        def timed(*args, **kwargs):
            name = label
            if label == "ZkStateStore.advance":
                to = args[3] if len(args) > 3 else kwargs.get("to")
                name = f"{label}:{getattr(to, 'value', to)}"
            start = time.monotonic()
            try:
                return original(*args, **kwargs)
            finally:
                calls.append(Call(name, start, time.monotonic()))
        timed.__wrapped__ = original
        return timed

    def total(self, name: str, within: Call | None = None) -> float:
        return sum(c.seconds for c in self.calls if c.name == name and
                   (within is None or (c.start >= within.start and c.end <= within.end)))

    def first(self, name: str) -> Call | None:
        return next((c for c in self.calls if c.name == name), None)

    def phases(self) -> dict:
        plan_call = self.first("Job._plan")
        tasks_call = self.first("Job._run_tasks")
        kafka_metadata = self.total("KafkaMetadata.partitions", plan_call) if plan_call else 0.0
        watermark_time = self.total("KafkaMetadata.watermarks", plan_call) if plan_call else 0.0
        zk_reads = self.total("ZkStateStore.open_batch") + (
            self.total("ZkStateStore.committed_offsets", plan_call) + self.total("ZkStateStore.batch_ids", plan_call)
            if plan_call else 0.0)
        plan_total = self.total("ZkStateStore.open_batch") + self.total("Job._plan") + self.total("ZkStateStore.write_plan")
        tables = self.total("build_spark") + self.total("HiveRegistrar.ensure_tables")
        tasks = (self.total("Job._run_tasks") - self.total("build_spark", tasks_call)
                 - self.total("HiveRegistrar.ensure_tables", tasks_call)) if tasks_call else 0.0
        check = (self.total("Job._check_files") + self.total("Job._sweep_temp_files")
                 + self.total("ZkStateStore.advance:WRITTEN"))
        register = self.total("HiveRegistrar.add_partition") + self.total("ZkStateStore.advance:REGISTERED")
        commit = self.total("ZkStateStore.commit")
        return {
            "setup": self.total("ZkStateStore.connect") + self.total("ZkStateStore.acquire_lock")
            + self.total("KafkaMetadata.__init__") + self.total("KafkaMetadata.partitions") - kafka_metadata,
            "plan": plan_total,
            "plan.kafka_metadata": kafka_metadata,
            "plan.watermarks": watermark_time,
            "plan.zk_reads": zk_reads,
            "plan.write_plan": self.total("ZkStateStore.write_plan"),
            "plan.other": plan_total - kafka_metadata - watermark_time - zk_reads - self.total("ZkStateStore.write_plan"),
            "tables": tables,  # Spark session lookup + CREATE of the fresh tables: once per process, not per batch
            "tasks": tasks,
            "check": check,
            "register": register,
            "commit": commit,
            "batch": plan_total + tasks + check + register + commit,
            "run_minus_tables": 0.0,  # filled in by run_job_timed
            "cleanup": self.total("ZkStateStore.prune_batches") + self.total("ZkStateStore.release_lock"),
        }


def run_job_timed(config, max_batches: int | None = 1) -> tuple[dict, str]:
    """etl.job.runner.run_job in this process, timed phase by phase; returns (phases, its stdout)."""
    from etl.job.runner import run_job
    timer = PhaseTimer()
    out = io.StringIO()
    with timer.installed(), contextlib.redirect_stdout(out):
        started = time.monotonic()
        code = run_job(config, max_batches=max_batches)
        wall = time.monotonic() - started
    if code != 0:
        raise RuntimeError(f"run_job exited {code}: {out.getvalue()}")
    phases = timer.phases()
    phases["run_minus_tables"] = wall - phases["tables"]
    return {**phases, "run_total": wall}, out.getvalue().strip()


def zk_client(stack: Stack):
    from kazoo.client import KazooClient
    client = KazooClient(hosts=stack.zk_hosts, timeout=10)
    client.start(timeout=15)
    return client


def job_state(config) -> tuple[dict, object]:
    """Committed offsets {(topic, partition): value} and the last batch, read from ZooKeeper."""
    from etl.state.store import ZkStateStore
    with ZkStateStore(config.zookeeper, config.job.name, config.retry) as store:
        offsets = {k: v.value for k, v in store.committed_offsets().items()}
        last = store.last_batch()
    return offsets, (last[0] if last else None)


def check_loaded(config, expected_ranges: list[tuple[str, int, int, int]], expected_rows: int) -> dict:
    """The run committed exactly the expected ranges, and wrote a row (or reject) for each record."""
    offsets, batch = job_state(config)
    if batch is None or batch.state.value != "COMMITTED":
        raise RuntimeError(f"job {config.job.name}: the batch is not COMMITTED: {batch}")
    ranges = sorted((r.topic, r.partition, r.start, r.end) for r in batch.ranges)
    if ranges != sorted(expected_ranges):
        raise RuntimeError(f"job {config.job.name}: batch ranges {ranges[:4]}... differ from {sorted(expected_ranges)[:4]}...")
    wrong = [(t, p, offsets.get((t, p)), end) for t, p, _s, end in expected_ranges if offsets.get((t, p)) != end]
    if wrong:
        raise RuntimeError(f"job {config.job.name}: committed offsets differ from the plan's ends: {wrong[:5]}")
    if (batch.rows or 0) + (batch.rejected or 0) != expected_rows:
        raise RuntimeError(f"job {config.job.name}: {batch.rows} rows + {batch.rejected} rejected != {expected_rows}")
    return {"batch_id": batch.batch_id, "rows": batch.rows, "rejected": batch.rejected, "ranges": len(ranges)}


# ---------------------------------------------------------------------------------------------
# What the Spark tasks run (defined here, so cloudpickle ships them by value to the workers)
# ---------------------------------------------------------------------------------------------

def consumer_for(settings: dict, topic: str, partition: int, start: int):
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({**settings, "group.id": "etl-bench", "enable.auto.commit": False,
                         "enable.auto.offset.store": False, "auto.offset.reset": "error",
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, partition, start)])
    return consumer


def consume_range(settings: dict, topic: str, partition: int, start: int, end: int, timeout: float = 30.0):
    """Yield lists of the messages at offsets [start, end), as the broker returns them.

    Asks for at most the records left in the range: librdkafka's consume(n, timeout) returns
    only when it has n messages or the timeout passed, so asking for more than are left
    makes the last call of every range wait the whole timeout (1 s) for records that are not
    in the range. etl.source.kafka.read_range asks for 10,000 every time."""
    from confluent_kafka import KafkaError
    consumer = consumer_for(settings, topic, partition, start)
    position, deadline = start, time.monotonic() + timeout
    try:
        while position < end:
            messages = consumer.consume(num_messages=min(10_000, end - position), timeout=1.0)
            records = [m for m in messages if m.error() is None]
            if records and records[-1].offset() >= end:
                records = [m for m in records if m.offset() < end]
                position = end
            if records:
                position = max(position, records[-1].offset() + 1)
                deadline = time.monotonic() + timeout
                yield records
            for m in messages:
                error = m.error()
                if error is not None and error.code() == KafkaError._PARTITION_EOF and m.offset() >= end:
                    position = end
                elif error is not None and error.code() != KafkaError._PARTITION_EOF:
                    raise RuntimeError(f"{topic}[{partition}]: {error}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic}[{partition}]: no progress at {position} of [{start}, {end})")
    finally:
        consumer.close()


def drain_task(spec) -> tuple[int, int]:
    """(records, value bytes) of one range: consume and count, nothing else."""
    settings, topic, partition, start, end = spec
    count = size = 0
    for records in consume_range(settings, topic, partition, start, end):
        count += len(records)
        size += sum(map(len, map(type(records[0]).value, records)))
    return count, size


def drain_read_range_task(spec) -> tuple[int, int]:
    """The same range through etl.source.kafka.read_range: consume + RawChunk lists, no decoding."""
    kafka_config, topic, partition, start, end = spec
    from etl.source.kafka import read_range
    count = size = 0
    for chunk in read_range(kafka_config, "etl-bench", topic, partition, start, end, with_keys=False):
        count += len(chunk)
        size += sum(map(len, chunk.values))
    return count, size


def rows_task(spec):
    """Row by row: one Python tuple per record, json.loads (or a regex) per record."""
    import datetime as dt
    import json as json_module
    import re
    settings, topic, partition, start, end, decoder = spec
    utc = dt.timezone.utc
    line = re.compile(rb"^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}) +([A-Z]+)(?: +(.*))?$", re.S)
    for records in consume_range(settings, topic, partition, start, end):
        for m in records:
            millis = m.timestamp()[1]
            lineage = (topic, partition, m.offset(), dt.datetime.fromtimestamp(millis / 1000, utc) if millis >= 0 else None)
            if decoder == "json":
                try:
                    obj = json_module.loads(m.value())
                    ts = obj.get("ts")
                    yield (obj.get("event_id"), obj.get("user_id"), obj.get("action"), obj.get("amount"),
                           dt.datetime.fromisoformat(ts) if ts else None, obj.get("ok")) + lineage
                except (ValueError, AttributeError):
                    continue  # a real job would route it to _rejected; the benchmark data is clean
            else:
                found = line.match(m.value() or b"")
                if found:
                    yield (dt.datetime.fromisoformat(found[1].decode()), found[2].decode(),
                           (found[3] or b"").decode(errors="replace")) + lineage


def row_schema(decoder: str):
    from pyspark.sql import types as T
    lineage = [T.StructField("kafka_topic", T.StringType()), T.StructField("kafka_partition", T.IntegerType()),
               T.StructField("kafka_offset", T.LongType()), T.StructField("kafka_timestamp", T.TimestampType())]
    if decoder == "json":
        data = [T.StructField("event_id", T.LongType()), T.StructField("user_id", T.StringType()),
                T.StructField("action", T.StringType()), T.StructField("amount", T.DoubleType()),
                T.StructField("ts", T.TimestampType()), T.StructField("ok", T.BooleanType())]
    else:
        data = [T.StructField("log_time", T.TimestampType()), T.StructField("level", T.StringType()),
                T.StructField("message", T.StringType())]
    return T.StructType(data + lineage)


def warm_task(_index):
    """Start the Python workers and import what the ETL's tasks import, outside any timing."""
    import confluent_kafka  # noqa: F401
    import pyarrow.parquet  # noqa: F401
    import etl.job.tasks  # noqa: F401
    return os.getpid()


# ---------------------------------------------------------------------------------------------
# Measurements
# ---------------------------------------------------------------------------------------------

def summarize(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "runs": values}


def rate(records: int, nbytes: int, seconds: float) -> dict:
    return {"records_per_s": records / seconds if seconds else None, "mb_per_s": nbytes / MB / seconds if seconds else None}


class Bench:
    def __init__(self, args, stack: Stack):
        self.args, self.stack = args, stack
        self.run_id = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}"
        self.work = WORK_ROOT / self.run_id
        self.zk_root = f"{ZK_BENCH_ROOT}/{self.run_id}"
        # One database for all benchmark runs, tables named per run and dropped after it: the
        # local metastore cannot drop a database (DROP DATABASE dies on a missing BoneCP class).
        self.database = "etl_bench"
        self.tables: list[str] = []
        self.gate = LoadGate(args.load_threshold, args.max_wait)
        self.topics: list[str] = []
        self.spark = None
        self.report: dict = {"run_id": self.run_id, "host": self.host_facts()}

    def host_facts(self) -> dict:
        import pyarrow
        import pyspark
        import confluent_kafka
        return {"cpus": os.cpu_count(), "python": platform.python_version(), "pyspark": pyspark.__version__,
                "pyarrow": pyarrow.__version__, "confluent_kafka": confluent_kafka.version()[0],
                "librdkafka": confluent_kafka.libversion()[0], "loadavg_at_start": list(loadavg())}

    # -- shared set-up -------------------------------------------------------------------------
    def ini(self, label: str, topics: list[str], decoder: str, max_records: int, **extra) -> Path:
        table = f"b{self.run_id[-6:]}_{label.replace('-', '_')}"
        self.tables.append(table)
        return write_ini(self.work / f"{label}.ini", stack=self.stack, name=f"bench-{label}", topics=topics,
                         zk_root=f"{self.zk_root}/{label}", warehouse=self.work / "warehouse", database=self.database,
                         table=table, decoder=decoder, max_records=max_records,
                         parallelism=self.args.parallelism, **extra)

    def start_spark(self) -> None:
        """One session for the whole benchmark, built the way the job builds it; run_job's
        getOrCreate then finds it, so no measurement pays the Spark start-up."""
        if self.spark is not None:
            return
        from etl.config import load_config
        from etl.hive.spark import build_spark
        config = load_config(self.ini("session", ["unused"], "json", 1))
        started = time.monotonic()
        self.spark = build_spark(config)
        self.report["bench_spark_session_start_s"] = time.monotonic() - started
        say(f"Spark session local[{self.args.parallelism}] up in {self.report['bench_spark_session_start_s']:.1f}s")
        started = time.monotonic()
        self.spark.sql("SHOW DATABASES").collect()  # the Hive client connects once, outside any timing
        say(f"metastore client connected in {time.monotonic() - started:.1f}s")
        started = time.monotonic()
        pids = self.spark.sparkContext.parallelize(range(self.args.parallelism * 2), self.args.parallelism * 2) \
            .map(warm_task).collect()
        say(f"Python workers warmed up in {time.monotonic() - started:.1f}s (pids {sorted(set(pids))})")

    def new_topic(self, partitions: int, label: str) -> str:
        topic = f"bench-{self.run_id}-{label}"
        create_topic(self.stack.bootstrap, topic, partitions)
        self.topics.append(topic)
        return topic

    def cleanup(self) -> None:
        if self.args.keep:
            say(f"kept: topics {self.topics}, ZooKeeper {self.zk_root}, Hive database {self.database}, {self.work}")
            return
        delete_topics(self.stack.bootstrap, self.topics)
        try:
            client = zk_client(self.stack)
            client.delete(self.zk_root, recursive=True)
            client.stop()
            client.close()
        except Exception as exc:
            say(f"could not delete {self.zk_root}: {exc}")
        if self.spark is not None:
            try:
                self.spark.sql("SHOW DATABASES").collect()  # reconnects an idle metastore client first
                for table in self.tables:
                    for name in (table, f"{table}_rejected"):
                        self.spark.sql(f"DROP TABLE IF EXISTS `{self.database}`.`{name}`")
            except Exception as exc:
                say(f"could not drop the Hive tables of this run: {str(exc).splitlines()[0]}")
        shutil.rmtree(self.work, ignore_errors=True)

    def measure(self, what: str, fn, workers: bool = False) -> tuple[object, dict]:
        gate = self.gate.wait(what)
        with Monitor(sample_workers=workers) as monitor:
            result = fn()
        stats = {**monitor.to_json(), "quiet_before": gate["quiet"]}
        say(f"{what}: {monitor.seconds:.2f}s (load {monitor.load_before[0]:.2f}; CPU cores used by this benchmark "
            f"{monitor.own_cores:.2f}, the local stack {monitor.stack_cores:.2f}, other processes "
            f"{monitor.foreign_cores:.2f})" + (f", peak worker RSS {monitor.peak_worker_rss / 2**20:.0f} MB"
                                                      if workers else ""))
        return result, stats

    # -- 1 + 2 + 3: throughput -----------------------------------------------------------------
    def throughput(self) -> None:
        args = self.args
        from etl.config import load_config
        self.start_spark()
        topic = self.new_topic(args.partitions, "data")
        per = [args.records // args.partitions + (1 if p < args.records % args.partitions else 0)
               for p in range(args.partitions)]
        say(f"producing {args.records:,} {args.decoder} records of ~{args.record_bytes} bytes into {topic} "
            f"({args.partitions} partitions)")
        produced = produce_checked(self.stack.bootstrap, topic, dict(enumerate(per)), value_maker(args.decoder, args.record_bytes))
        say(f"produced in {produced['seconds']:.1f}s ({produced['records'] / produced['seconds']:,.0f} records/s, "
            f"{produced['bytes'] / MB:.1f} MB)")
        ranges = [(topic, p, low, high) for p, (low, high) in sorted(produced["watermarks"].items())]
        records, nbytes = produced["records"], produced["bytes"]
        self.report["data"] = {"topic": topic, "records": records, "value_bytes": nbytes, "partitions": args.partitions,
                               "decoder": args.decoder, "record_bytes": args.record_bytes,
                               "produce_seconds": produced["seconds"], "ranges": ranges}
        settings = {"bootstrap.servers": self.stack.bootstrap}
        base_config = load_config(self.ini("base", [topic], args.decoder, max(per) + 1))
        sc = self.spark.sparkContext
        raw_specs = [(settings, t, p, s, e) for t, p, s, e in ranges]
        chunk_specs = [(base_config.kafka, t, p, s, e) for t, p, s, e in ranges]
        row_specs = [(settings, t, p, s, e, args.decoder) for t, p, s, e in ranges]

        def drain(task, specs):
            def go():
                counted = sc.parallelize(specs, len(specs)).map(task).collect()
                got = sum(c for c, _ in counted)
                if got != records:
                    raise RuntimeError(f"drain counted {got} records, expected {records}")
                return counted
            return go

        results = {"drain": [], "drain_read_range": [], "full_batch": [], "row_by_row": []}
        for rep in range(1, args.repeat + 1):
            _, stats = self.measure(f"drain #{rep}", drain(drain_task, raw_specs))
            results["drain"].append(stats)
            _, stats = self.measure(f"drain+chunk (read_range) #{rep}", drain(drain_read_range_task, chunk_specs))
            results["drain_read_range"].append(stats)

            config = load_config(self.ini(f"full-{rep}", [topic], args.decoder, max(per) + 1))
            (phases, said), stats = self.measure(f"full batch #{rep}", lambda: run_job_timed(config), workers=True)
            loaded = check_loaded(config, ranges, records)
            results["full_batch"].append({**stats, "phases": phases, "job_said": said, "loaded": loaded})
            say(f"  phases: " + ", ".join(f"{k} {v:.2f}s" for k, v in phases.items() if "." not in k))
            self.last_full_config = config

            out = self.work / f"row-by-row-{rep}"

            def row_by_row():
                rdd = sc.parallelize(row_specs, len(row_specs)).flatMap(rows_task)
                self.spark.createDataFrame(rdd, row_schema(args.decoder)).write.parquet(f"file://{out}")
            _, stats = self.measure(f"row-by-row #{rep}", row_by_row)
            written = self.spark.read.parquet(f"file://{out}").count()
            if written != records:
                raise RuntimeError(f"row-by-row wrote {written} rows, expected {records}")
            shutil.rmtree(out, ignore_errors=True)
            results["row_by_row"].append(stats)

        summary = {}
        for name, runs in results.items():
            key = "batch" if name == "full_batch" else None
            seconds = [r["phases"][key] for r in runs] if key else [r["seconds"] for r in runs]
            entry = {"seconds": summarize(seconds), **rate(records, nbytes, statistics.median(seconds)),
                     "loadavg_before": [r["loadavg_before"][0] for r in runs],
                     "foreign_cpu_cores": [r["foreign_cpu_cores"] for r in runs],
                     "own_cpu_cores": [r["own_cpu_cores"] for r in runs],
                     "stack_cpu_cores": [r["stack_cpu_cores"] for r in runs],
                     "quiet_before": [r["quiet_before"] for r in runs]}
            if name == "full_batch":
                entry["phases_median"] = {k: statistics.median(r["phases"][k] for r in runs) for k in runs[0]["phases"]}
                entry["phases_runs"] = [r["phases"] for r in runs]
                entry["run_total_rate"] = rate(records, nbytes, entry["phases_median"]["run_minus_tables"])
                entry["peak_worker_rss_mb"] = summarize([r["peak_worker_rss_mb"] for r in runs])
                entry["peak_workers_total_rss_mb"] = summarize([r["peak_workers_total_rss_mb"] for r in runs])
                entry["job_said"] = runs[-1]["job_said"]
                entry["loaded"] = [r["loaded"] for r in runs]
            summary[name] = entry
        median = {k: v["seconds"]["median"] for k, v in summary.items()}
        summary["ratios"] = {
            "full_batch_vs_drain": median["drain"] / median["full_batch"],
            "full_batch_vs_row_by_row": median["row_by_row"] / median["full_batch"],
            "drain_read_range_vs_drain": median["drain"] / median["drain_read_range"],
            "full_run_total_vs_drain": median["drain"] / summary["full_batch"]["phases_median"]["run_minus_tables"],
        }
        self.report["throughput"] = summary
        if args.py_spy:
            config = load_config(self.ini("py-spy", [topic], args.decoder, max(per) + 1))
            self.report["py_spy"] = self.py_spy_batch(config)

    def py_spy_batch(self, config) -> dict:
        """One more full batch (not timed), with py-spy sampling every Spark Python worker."""
        exe = shutil.which("py-spy", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
        if exe is None:
            raise SystemExit("bench: --py-spy needs py-spy: .venv/bin/python -m pip install py-spy==0.4.3")
        out_dir = self.work / "py-spy"
        out_dir.mkdir(parents=True, exist_ok=True)
        workers, _daemons = Monitor._find_workers(_proc_table())
        spies = [subprocess.Popen([exe, "record", "--pid", str(pid), "--rate", "250", "--nonblocking", "--format", "raw",
                                   "--output", str(out_dir / f"{pid}.txt")], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL) for pid in sorted(workers)]
        time.sleep(1.0)  # py-spy attaches
        say(f"py-spy: sampling workers {sorted(workers)} during one more full batch")
        try:
            phases, _said = run_job_timed(config)
        finally:
            for spy in spies:
                spy.send_signal(2)  # SIGINT: py-spy writes its file and exits
            for spy in spies:
                try:
                    spy.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    spy.kill()
        return {"phases": phases, **summarize_stacks(sorted(out_dir.glob("*.txt")))}

    # -- 4: fixed cost -------------------------------------------------------------------------
    def fixed_cost(self) -> None:
        """`etl run` (the CLI, a fresh process) on a job that has loaded everything: nothing to do."""
        if getattr(self, "last_full_config", None) is None:  # --fixed-cost-only: load something first
            from etl.config import load_config
            topic = self.new_topic(2, "fixed")
            produce_checked(self.stack.bootstrap, topic, {0: 100, 1: 100}, value_maker("json", 130))
            self.last_full_config = load_config(self.ini("fixed", [topic], "json", 1000))
            self.start_spark()
            run_job_timed(self.last_full_config)
        ini = str(self.last_full_config.path)
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
        runs, imports, cli_said = [], [], ""
        for rep in range(1, 6):
            def cli():
                return subprocess.run([ETL_CLI, "run", "--config", ini], env=env, capture_output=True, text=True,
                                      timeout=120, start_new_session=True)
            done, stats = self.measure(f"etl run, nothing new #{rep}", cli)
            if done.returncode != 0 or "nothing to do" not in done.stderr or "COMMITTED" in done.stdout:
                raise RuntimeError(f"`etl run` with nothing new: exit {done.returncode}\n{done.stdout}\n{done.stderr}")
            if "SparkContext" in done.stderr or "SparkSession" in done.stderr:
                say("warning: the no-data run seems to have started Spark")
            runs.append(stats)
            cli_said = next((line for line in done.stderr.splitlines() if "nothing to do" in line), "")
        for rep in range(1, 6):
            started = time.monotonic()
            subprocess.run([sys.executable, "-c", "import etl.cli, etl.job.runner, etl.job.driver"], check=True, env=env)
            imports.append(time.monotonic() - started)
        startup = []
        for rep in range(1, min(3, self.args.repeat) + 1):
            def spark_start():
                return subprocess.run([sys.executable, "-c", SPARK_STARTUP_SNIPPET, ini], env=env, capture_output=True,
                                      text=True, timeout=300, start_new_session=True)
            done, stats = self.measure(f"Spark session start-up (fresh process) #{rep}", spark_start)
            if done.returncode != 0:
                raise RuntimeError(f"Spark start-up probe failed:\n{done.stderr[-3000:]}")
            startup.append({**json.loads(done.stdout.strip().splitlines()[-1]), "process_seconds": stats["seconds"],
                            "loadavg_before": stats["loadavg_before"], "foreign_cpu_cores": stats["foreign_cpu_cores"]})
        self.report["fixed_cost"] = {
            "no_data_run_seconds": summarize([r["seconds"] for r in runs]),
            "no_data_run_loadavg_before": [r["loadavg_before"][0] for r in runs],
            "no_data_run_foreign_cpu_cores": [r["foreign_cpu_cores"] for r in runs],
            "no_data_run_said": cli_said,
            "python_imports_seconds": summarize(imports),
            "spark_startup": {k: summarize([s[k] for s in startup]) for k in startup[0] if k != "loadavg_before"},
        }

    # -- 3: memory -----------------------------------------------------------------------------
    def memory_check(self) -> None:
        from etl.config import load_config
        sizes = [int(x) for x in self.args.memory_records.split(",")]
        self.start_spark()
        out = []
        for n in sizes:
            label = f"mem-{n}"
            topic = self.new_topic(1, label)
            say(f"producing {n:,} records into {topic} (1 partition)")
            produced = produce_checked(self.stack.bootstrap, topic, {0: n}, value_maker(self.args.decoder, self.args.record_bytes))
            say(f"produced in {produced['seconds']:.1f}s")
            ranges = [(topic, 0, *produced["watermarks"][0])]
            config = load_config(self.ini(label, [topic], self.args.decoder, n + 1))
            (phases, said), stats = self.measure(f"full batch, one partition of {n:,}", lambda: run_job_timed(config),
                                                 workers=True)
            loaded = check_loaded(config, ranges, n)
            out.append({"records": n, "value_bytes": produced["bytes"], "row_group_size": config.job.row_group_size,
                        **stats, "phases": phases, "batch_rate": rate(n, produced["bytes"], phases["batch"]),
                        "loaded": loaded, "job_said": said})
            delete_topics(self.stack.bootstrap, [topic])  # the broker holds topics in memory
            self.topics.remove(topic)
        self.report["memory"] = out

    # -- 5: partitions -------------------------------------------------------------------------
    def partition_scaling(self) -> None:
        from etl.config import load_config
        counts = [int(x) for x in self.args.partition_scaling.split(",")]
        k = self.args.scaling_records
        out = []
        for n in counts:
            label = f"parts-{n}"
            entry: dict = {"partitions": n, "records_per_partition_per_batch": k}
            try:
                if self.args.scaling_zk_only:
                    raise RuntimeError("--scaling-zk-only")
                topic = self.new_topic(n, label)
            except Exception as exc:
                say(f"{n} partitions: the broker could not create the topic ({exc}); measuring ZooKeeper only")
                entry.update(mode="zookeeper-only", broker_error=str(exc), **self.zk_only_scaling(n, label))
                out.append(entry)
                continue
            entry["mode"] = "full job"
            self.start_spark()
            make = value_maker(self.args.decoder, self.args.record_bytes)
            config = load_config(self.ini(label, [topic], self.args.decoder, 10 * k + 10))
            batches = []
            for batch_no in range(1, self.args.scaling_batches + 1):
                started = time.monotonic()
                before = watermarks(self.stack.bootstrap, topic)
                produce_checked(self.stack.bootstrap, topic, {p: k for p in range(n)}, make,
                                start={p: before[p][1] for p in range(n)},
                                first_ids={p: p * 1000 + before[p][1] for p in range(n)})
                marks = watermarks(self.stack.bootstrap, topic)
                say(f"{n} partitions: produced {n * k} records in {time.monotonic() - started:.1f}s")
                ranges = [(topic, p, before[p][1], marks[p][1]) for p in range(n)]
                (phases, said), stats = self.measure(f"{n} partitions, batch {batch_no}", lambda: run_job_timed(config))
                loaded = check_loaded(config, ranges, n * k)
                batches.append({"batch": batch_no, "phases": phases, **stats, "loaded": loaded,
                                "znodes": self.znode_sizes(config, loaded["batch_id"]), "job_said": said})
            (phases, said), stats = self.measure(f"{n} partitions, nothing new", lambda: run_job_timed(config))
            entry.update(batches=batches, no_data={"phases": phases, **stats, "job_said": said})
            out.append(entry)
            delete_topics(self.stack.bootstrap, [topic])
            self.topics.remove(topic)
        self.report["partition_scaling"] = out

    def znode_sizes(self, config, batch_id: int) -> dict:
        from etl.state.store import ZkPaths
        paths = ZkPaths(config.zookeeper.root, config.job.name)
        client = zk_client(self.stack)
        try:
            header = client.exists(paths.batch(batch_id)).dataLength
            chunks = sorted(client.get_children(paths.batch(batch_id)))
            chunk_sizes = [client.exists(f"{paths.batch(batch_id)}/{c}").dataLength for c in chunks]
            offsets = 0
            offset_paths = []
            for topic in client.get_children(paths.offsets):
                parts = client.get_children(f"{paths.offsets}/{topic}")
                offsets += len(parts)
                offset_paths += [(f"{paths.offsets}/{topic}/{p}", 12) for p in parts]
        finally:
            client.stop()
            client.close()
        # The commit is one multi-op request: 2 fence checks, a set (or create) per offset, the
        # header. Jute sizes: op header 9 B; path and data 4 B + bytes; version 4 B; a create's ACL ~30 B.
        txn = 2 * (9 + 4 + len(paths.lock) + 4) + sum(9 + 4 + len(p) + 4 + size + 4 + 30 for p, size in offset_paths) \
            + 9 + 4 + len(paths.batch(batch_id)) + 4 + header + 4
        return {"header_bytes": header, "range_chunks": len(chunk_sizes), "range_chunk_bytes": chunk_sizes,
                "offset_znodes": offsets, "commit_request_bytes_estimate": txn}

    def zk_only_scaling(self, n: int, label: str) -> dict:
        """No topic: plan, store, advance and commit a batch of n ranges with etl.state.store directly."""
        from etl.model.batch import Batch, BatchState, OffsetRange, hive_partition_values, utc_now, utc_now_iso
        from etl.config import load_config
        from etl.state.store import ZkStateStore
        config = load_config(self.ini(label, ["zk-only"], self.args.decoder, 1000))
        k = self.args.scaling_records
        results = []
        with ZkStateStore(config.zookeeper, config.job.name, config.retry) as store:
            if store.acquire_lock() is not None:
                raise RuntimeError("lock held")
            try:
                for batch_no in (1, 2):
                    timings = {}
                    started = time.monotonic()
                    committed = store.committed_offsets()
                    timings["zk_reads"] = time.monotonic() - started
                    ranges = tuple(OffsetRange("zk-only", p, (batch_no - 1) * k, batch_no * k,
                                               committed[("zk-only", p)].value if ("zk-only", p) in committed else None)
                                   for p in range(n))
                    now = utc_now()
                    batch = Batch(batch_no, BatchState.PLANNED, now.isoformat(timespec="seconds"),
                                  hive_partition_values(now), ranges, planned_by=store.me.describe(), updated_at=utc_now_iso())
                    started = time.monotonic()
                    version = store.write_plan(batch)
                    timings["write_plan"] = time.monotonic() - started
                    batch, version = store.advance(batch, version, BatchState.WRITTEN, rows=n * k, rejected=0)
                    batch, version = store.advance(batch, version, BatchState.REGISTERED)
                    started = time.monotonic()
                    store.commit(batch, version)
                    timings["commit"] = time.monotonic() - started
                    offsets = {key: v.value for key, v in store.committed_offsets().items()}
                    ok = all(offsets.get(("zk-only", p)) == batch_no * k for p in range(n))
                    results.append({"batch": batch_no, "timings": timings, "offsets_match": ok,
                                    "znodes": self.znode_sizes(config, batch_no)})
            finally:
                store.release_lock()
        return {"batches": results}

    # -- 5b: profile ---------------------------------------------------------------------------
    def profile(self) -> None:
        """One range, in this process: the reader alone, reader + decode, and the whole task
        (etl.job.tasks.run_range_task) under cProfile."""
        import cProfile
        import pstats
        from etl.config import load_config
        from etl.source.kafka import read_range
        from etl.job.runner import writer_spec
        from etl.job.tasks import RangeTask, run_range_task
        from etl.model.batch import OffsetRange
        data = self.report.get("data")
        if data is None:
            topic = self.new_topic(1, "profile")
            n = self.args.records // self.args.partitions
            produced = produce_checked(self.stack.bootstrap, topic, {0: n}, value_maker(self.args.decoder, self.args.record_bytes))
            t, p, s, e = topic, 0, *produced["watermarks"][0]
        else:
            t, p, s, e = data["ranges"][0]
        config = load_config(self.ini("profile", [t], self.args.decoder, e - s + 1))
        spec = writer_spec(config)
        out: dict = {"range": [t, p, s, e]}

        def timed(label, fn):
            self.gate.wait(label)
            started = time.monotonic()
            fn()
            out[label] = time.monotonic() - started
            say(f"profile: {label} {out[label]:.2f}s ({(e - s) / out[label]:,.0f} records/s)")

        def reader():
            for _chunk in read_range(config.kafka, "etl-bench", t, p, s, e, with_keys=False):
                pass

        def reader_decode():
            for chunk in read_range(config.kafka, "etl-bench", t, p, s, e, with_keys=False):
                spec.decoder.decode(chunk.values)

        def raw():
            for _records in consume_range({"bootstrap.servers": self.stack.bootstrap}, t, p, s, e):
                pass

        timed("consume_only", raw)
        timed("read_range", reader)
        timed("read_range+decode", reader_decode)
        main_dir = str(self.work / "profile" / "main")
        rejected_dir = str(self.work / "profile" / "rejected")
        task = RangeTask(OffsetRange(t, p, s, e, None), main_dir, rejected_dir, config.warehouse, config.kafka,
                         "etl-bench", spec)
        os.makedirs(main_dir, exist_ok=True)
        timed("run_range_task", lambda: run_range_task(task))
        shutil.rmtree(self.work / "profile", ignore_errors=True)
        os.makedirs(main_dir, exist_ok=True)
        profiler = cProfile.Profile()
        profiler.enable()
        run_range_task(task)
        profiler.disable()
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(25)
        out["cprofile_top_tottime"] = text.getvalue()
        shutil.rmtree(self.work / "profile", ignore_errors=True)
        self.report["profile"] = out


def summarize_stacks(files: list[Path]) -> dict:
    """Self and inclusive sample counts per function, from py-spy's collapsed stacks, counting
    only stacks inside the ETL's task (etl.job.tasks.run_range_task): the worker's idle time is not
    the task's."""
    own: dict[str, int] = {}
    inclusive: dict[str, int] = {}
    total = 0
    for file in files:
        for line in file.read_text(errors="replace").splitlines():
            stack, _, count = line.rpartition(" ")
            if not count.isdigit() or "run_range_task" not in stack:
                continue
            n = int(count)
            total += n
            frames = [_frame_name(f) for f in stack.split(";")]
            own[frames[-1]] = own.get(frames[-1], 0) + n
            for frame in set(frames[frames.index(next(f for f in frames if "run_range_task" in f)):]):
                inclusive[frame] = inclusive.get(frame, 0) + n
    top = lambda d: [[name, count, round(100 * count / total, 1)] for name, count in
                     sorted(d.items(), key=lambda kv: -kv[1])[:25]] if total else []
    return {"task_samples": total, "self_top": top(own), "inclusive_top": top(inclusive)}


def _frame_name(frame: str) -> str:
    """'func (path/to/file.py:123)' -> 'func (file.py:123)', shorter and still unique enough."""
    name, _, where = frame.partition(" (")
    where = where.rstrip(")")
    return f"{name} ({where.rsplit('/', 1)[-1]})" if where else name


SPARK_STARTUP_SNIPPET = r"""
import json, sys, time
t0 = time.monotonic()
from etl.config import load_config
from etl.hive.spark import build_spark
config = load_config(sys.argv[1])
t1 = time.monotonic()
spark = build_spark(config)
t2 = time.monotonic()
spark.sql("SHOW DATABASES").collect()
t3 = time.monotonic()
spark.sparkContext.parallelize([1, 2], 2).map(lambda x: x).collect()
t4 = time.monotonic()
spark.stop()
print(json.dumps({"imports_seconds": t1 - t0, "session_seconds": t2 - t1, "first_metastore_call_seconds": t3 - t2,
                  "first_python_task_seconds": t4 - t3}))
"""


# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------

def _spread(s: dict, unit: str = "s", digits: int = 2) -> str:
    return f"{s['median']:.{digits}f}{unit} (min {s['min']:.{digits}f}, max {s['max']:.{digits}f})"


def render(report: dict) -> str:
    lines = []
    host = report["host"]
    lines.append(f"bench {report['run_id']}: {host['cpus']} CPUs, Python {host['python']}, Spark {host['pyspark']}, "
                 f"pyarrow {host['pyarrow']}, librdkafka {host['librdkafka']}")
    lines.append(f"command: {' '.join(report['argv'])}")
    lines.append(f"load average at start: {host['loadavg_at_start']}; at end: {report.get('loadavg_at_end')}; "
                 f"waited {report.get('load_waited_s', 0):.0f}s for a quiet machine"
                 + ("; GAVE UP waiting (measured under load)" if report.get("load_gate_gave_up") else ""))
    targets = []
    if "throughput" in report:
        d, t = report["data"], report["throughput"]
        lines.append("")
        lines.append(f"data: {d['records']:,} {d['decoder']} records, {d['value_bytes'] / MB:.1f} MB of values "
                     f"(~{d['value_bytes'] / d['records']:.0f} B each), {d['partitions']} partitions; "
                     f"produced in {d['produce_seconds']:.1f}s")
        lines.append(f"Spark local[{report['args']['parallelism']}], one task per partition, {report['args']['repeat']} "
                     f"repetitions, medians (min, max):")
        lines.append(f"  {'path':<34} {'time':>28} {'records/s':>12} {'MB/s':>8}  per run: load-1m before | CPU cores "
                     f"used by the benchmark, the local stack, other processes")
        names = {"drain": "(a) drain (consume + count)", "drain_read_range": "    drain via etl read_range",
                 "full_batch": "(b) full etl batch (plan..commit)", "row_by_row": "(c) row-by-row DataFrame"}
        for key, label in names.items():
            e = t[key]
            loads = "/".join(f"{x:.2f}" for x in e["loadavg_before"])
            cpu = " ".join(f"{a:.2f},{b:.2f},{c:.2f}" for a, b, c in
                           zip(e["own_cpu_cores"], e["stack_cpu_cores"], e["foreign_cpu_cores"]))
            lines.append(f"  {label:<34} {_spread(e['seconds']):>28} {e['records_per_s']:>12,.0f} {e['mb_per_s']:>8.1f}"
                         f"  {loads} | {cpu}")
        fb = t["full_batch"]
        run_total = fb["phases_median"]["run_minus_tables"]
        lines.append(f"  {'    whole run_job but CREATE TABLE':<34} {run_total:>27.2f}s {fb['run_total_rate']['records_per_s']:>12,.0f} "
                     f"{fb['run_total_rate']['mb_per_s']:>8.1f}")
        lines.append("  full batch phases (median s): " + ", ".join(
            f"{k} {v:.3f}" for k, v in fb["phases_median"].items() if k not in ("batch", "run_total", "run_minus_tables")))
        lines.append(f"  job said: {fb['job_said']}")
        lines.append(f"  peak Python worker RSS during (b): {_spread(fb['peak_worker_rss_mb'], ' MB', 0)}; "
                     f"daemon + workers: {_spread(fb['peak_workers_total_rss_mb'], ' MB', 0)}")
        r = t["ratios"]
        lines.append(f"  ratios: full batch / drain = {r['full_batch_vs_drain']:.2f}x (target >= 0.8x); "
                     f"full batch / row-by-row = {r['full_batch_vs_row_by_row']:.2f}x (target >= 3x); "
                     f"read_range / drain = {r['drain_read_range_vs_drain']:.2f}x; "
                     f"whole run_job / drain = {r['full_run_total_vs_drain']:.2f}x")
        targets.append(("full batch >= 0.8x drain", r["full_batch_vs_drain"] >= 0.8, f"{r['full_batch_vs_drain']:.2f}x"))
        targets.append(("full batch >= 3x row-by-row", r["full_batch_vs_row_by_row"] >= 3,
                        f"{r['full_batch_vs_row_by_row']:.2f}x"))
    if "fixed_cost" in report:
        f = report["fixed_cost"]
        s = f["spark_startup"]
        lines.append("")
        lines.append("fixed cost, nothing new to load:")
        lines.append(f"  `etl run` (fresh process, no Spark): {_spread(f['no_data_run_seconds'])} over 5 runs; "
                     f"load before {'/'.join(f'{x:.2f}' for x in f['no_data_run_loadavg_before'])}")
        lines.append(f"    of which interpreter + imports of etl: {_spread(f['python_imports_seconds'])}")
        lines.append(f"    it said: {f['no_data_run_said']}")
        lines.append(f"  for reference, Spark start-up in a fresh process: session {_spread(s['session_seconds'])}, "
                     f"first metastore call {_spread(s['first_metastore_call_seconds'])}, first Python task "
                     f"{_spread(s['first_python_task_seconds'])}, whole process {_spread(s['process_seconds'])}")
        targets.append(("no-data run <= 2 s (Spark not started)", f["no_data_run_seconds"]["median"] <= 2.0,
                        f"{f['no_data_run_seconds']['median']:.2f}s"))
    if "memory" in report:
        lines.append("")
        lines.append("memory: one partition-batch per run (row_group_size "
                     f"{report['memory'][0]['row_group_size']}), Python worker RSS sampled every 50 ms:")
        for m in report["memory"]:
            lines.append(f"  {m['records']:>11,} records ({m['value_bytes'] / MB:,.0f} MB): peak worker RSS "
                         f"{m['peak_worker_rss_mb']:.0f} MB (before the run {m['worker_rss_before_mb']:.0f} MB; daemon + "
                         f"workers {m['peak_workers_total_rss_mb']:.0f} MB, {m['rss_samples']} samples); batch "
                         f"{m['phases']['batch']:.1f}s = {m['batch_rate']['records_per_s']:,.0f} records/s; load before "
                         f"{m['loadavg_before'][0]:.2f}, foreign CPU {m['foreign_cpu_cores']:.2f} cores")
        if len(report["memory"]) >= 2:
            small, big = report["memory"][0], report["memory"][-1]
            growth = big["peak_worker_rss_mb"] / small["peak_worker_rss_mb"] if small["peak_worker_rss_mb"] else float("nan")
            lines.append(f"  {big['records'] // small['records']}x the records -> {growth:.2f}x the peak worker RSS")
            targets.append((f"flat memory {small['records']:,} vs {big['records']:,}", growth <= 1.25, f"{growth:.2f}x"))
    if "partition_scaling" in report:
        lines.append("")
        lines.append("partitions: plan (Kafka metadata + watermarks + ZooKeeper reads + write_plan) and commit "
                     "(one ZooKeeper transaction), seconds:")
        lines.append(f"  {'partitions':>10} {'batch':>6} {'plan':>7} {'meta':>6} {'marks':>6} {'zk rd':>6} {'wr plan':>7} "
                     f"{'commit':>7} {'tasks':>7} {'run':>7}  znodes (header B, chunks x B), commit request ~B")
        ok_all = True
        for entry in report["partition_scaling"]:
            n = entry["partitions"]
            if entry["mode"] == "zookeeper-only":
                for b in entry["batches"]:
                    tm, z = b["timings"], b["znodes"]
                    lines.append(f"  {n:>10} {b['batch']:>6} {'-':>7} {'-':>6} {'-':>6} {tm['zk_reads']:>6.3f} "
                                 f"{tm['write_plan']:>7.3f} {tm['commit']:>7.3f} {'-':>7} {'-':>7}  {z['header_bytes']}, "
                                 f"{z['range_chunks']} x {z['range_chunk_bytes']}, ~{z['commit_request_bytes_estimate']:,}"
                                 f"  offsets match: {b['offsets_match']} (ZooKeeper only)")
                    ok_all &= b["offsets_match"]
                continue
            rows = [(str(b["batch"]), b["phases"], b["znodes"], b["loaded"]) for b in entry["batches"]]
            rows.append(("no-data", entry["no_data"]["phases"], None, None))
            for batch, ph, z, loaded in rows:
                zs = (f"{z['header_bytes']}, {z['range_chunks']} x {z['range_chunk_bytes']}, "
                      f"~{z['commit_request_bytes_estimate']:,}") if z else ""
                lines.append(f"  {n:>10} {batch:>6} {ph['plan']:>7.3f} {ph['plan.kafka_metadata']:>6.3f} "
                             f"{ph['plan.watermarks']:>6.3f} {ph['plan.zk_reads']:>6.3f} {ph['plan.write_plan']:>7.3f} "
                             f"{ph['commit']:>7.3f} {ph['tasks']:>7.2f} {ph['run_total']:>7.2f}  {zs}"
                             + (f"  committed {loaded['ranges']} offsets = watermarks, {loaded['rows']} rows" if loaded else ""))
        biggest = report["partition_scaling"][-1]
        if biggest["mode"] == "full job":
            worst = max(max(b["phases"]["plan"], b["phases"]["commit"]) for b in biggest["batches"])
            targets.append((f"{biggest['partitions']} partitions fine (plan and commit each < 5 s, offsets verified)",
                            worst < 5.0 and ok_all, f"worst plan/commit {worst:.2f}s"))
        else:
            targets.append((f"{biggest['partitions']} partitions (ZooKeeper only)", ok_all, "offsets verified"))
    if "profile" in report:
        p = report["profile"]
        n = p["range"][3] - p["range"][2]
        lines.append("")
        lines.append(f"profile of one range ({n:,} records) in the benchmark process:")
        for key in ("consume_only", "read_range", "read_range+decode", "run_range_task"):
            if key in p:
                lines.append(f"  {key:<20} {p[key]:6.2f}s  {n / p[key]:>10,.0f} records/s")
        lines.append(p["cprofile_top_tottime"])
    if "py_spy" in report:
        p = report["py_spy"]
        lines.append("")
        lines.append(f"py-spy, Spark Python workers during one more full batch ({p['task_samples']} samples inside "
                     f"run_range_task, 250/s; tasks phase {p['phases']['tasks']:.2f}s):")
        lines.append("  inclusive (share of the task's samples):")
        for name, count, share in p["inclusive_top"][:20]:
            lines.append(f"    {share:5.1f}%  {name}")
        lines.append("  self:")
        for name, count, share in p["self_top"][:15]:
            lines.append(f"    {share:5.1f}%  {name}")
    if targets:
        lines.append("")
        lines.append("targets:")
        for name, ok, value in targets:
            lines.append(f"  {'MET ' if ok else 'MISSED'}  {name}: {value}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--record-bytes", type=int, default=130)
    parser.add_argument("--decoder", choices=("json", "access_log"), default="json")
    parser.add_argument("--parallelism", type=int, default=2, help="Spark local[P] (default 2)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--memory-check", action="store_true",
                        help="only: the full batch on one partition of 1M and one of 10M records, peak worker RSS")
    parser.add_argument("--memory-records", default="1000000,10000000", help="partition-batch sizes for --memory-check")
    parser.add_argument("--partition-scaling", metavar="N,N,...", help="only: plan and commit time for topics of N partitions")
    parser.add_argument("--scaling-records", type=int, default=3, help="records per partition per batch (default 3)")
    parser.add_argument("--scaling-batches", type=int, choices=(1, 2), default=2,
                        help="batches per partition count: 1 (offsets created) or 2 (also updated; default)")
    parser.add_argument("--scaling-zk-only", action="store_true", help="measure partition scaling on ZooKeeper alone")
    parser.add_argument("--profile", action="store_true",
                        help="also profile one range in this process (reader, decoder, whole task under cProfile)")
    parser.add_argument("--py-spy", action="store_true",
                        help="also run one more full batch with py-spy sampling the Spark Python workers "
                             "(py-spy is in the dev extra that scripts/setup installs)")
    parser.add_argument("--no-fixed-cost", action="store_true", help="skip the no-data run and Spark start-up timing")
    parser.add_argument("--load-threshold", type=float, default=1.0, help="measure when the 1-minute load is below this")
    parser.add_argument("--max-wait", type=float, default=1200.0,
                        help="seconds to wait for a quiet machine, in all (default 1200; 0: never wait)")
    parser.add_argument("--json", action="store_true", help="print the results as one JSON object")
    parser.add_argument("--json-out", metavar="FILE", help="write the JSON object to FILE (implies --json)")
    parser.add_argument("--keep", action="store_true", help="keep topics, ZooKeeper nodes, tables and files")
    parser.add_argument("--verbose", action="store_true", help="show the job's INFO log lines")
    args = parser.parse_args(argv)
    if args.records < args.partitions or args.partitions < 1 or args.repeat < 1 or args.parallelism < 1:
        parser.error("need --records >= --partitions >= 1, --repeat >= 1 and --parallelism >= 1")
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    stack = local_stack()
    bench = Bench(args, stack)
    bench.report["argv"] = [Path(sys.executable).name, "scripts/bench.py", *(argv if argv is not None else sys.argv[1:])]
    bench.report["args"] = vars(args)
    only = args.memory_check or args.partition_scaling
    try:
        if args.partition_scaling:
            bench.partition_scaling()
        if args.memory_check:
            bench.memory_check()
        if not only:
            bench.throughput()
            if not args.no_fixed_cost:
                bench.fixed_cost()
        if args.profile:
            bench.profile()
    finally:
        bench.report["loadavg_at_end"] = list(loadavg())
        bench.report["load_waited_s"] = bench.gate.waited
        bench.report["load_gate_gave_up"] = bench.gate.gave_up
        bench.cleanup()
    text = render(bench.report)
    if args.json or args.json_out:
        blob = json.dumps(bench.report, indent=2, default=str)
        if args.json_out:
            Path(args.json_out).write_text(blob + "\n")
            print(text)
        else:
            print(blob)
            print(text, file=sys.stderr)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
