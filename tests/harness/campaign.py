"""Random SIGKILLs of `etl run`, and what each kill interrupted."""
from __future__ import annotations

import datetime as dt
import os
import random
import re
import signal
import time
import zoneinfo
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from tests.harness.data import DataSource
from tests.harness.etl_process import EtlProcess
from tests.harness.oracle import check_interim
from tests.harness.state import JobState, job_state, wait_for_lock_release

# The job's own DEBUG lines (the campaign runs `etl -v run`): the libraries' INFO lines are off by
# default and Spark's go through the package's log4j2 config, so neither marks a step any more.
ZK_CONNECTED = "connected to ZooKeeper at"  # etl.state.store
SPARK_STARTED = "SparkContext started"  # etl.hive.spark: the JVM is up (a session comes later, if at all)
_COMMITTED_LINE = re.compile(r"batch \d+ \((?:new|resumed)\) COMMITTED")
START_ANCHOR, BATCH_ANCHOR = "process start", "first batch line"
# The kill delays as shares of a normal run (the baseline): from the process start, up to its
# whole length and more; from the first batch line, up to 0.3 of it, because the batches of a
# run end about 1 to 2 s after that line here (at 0.5, 4 of test_crash.py's 10 runs ended
# before their kill, each a whole run spent on no kill).
START_DELAY_SHARE, BATCH_DELAY_SHARE = 1.2, 0.3
_BATCH_LINE = re.compile(r"batch \d+ PLANNED|resuming batch \d+|batch \d+ \((?:new|resumed)\) COMMITTED")


@dataclass(frozen=True)
class CampaignSeed:
    """A campaign's seed: its fixed CI seed, or another from its environment variable. Every
    campaign prints it (str()), so that a failure names the seed that replays it."""
    value: int
    variable: str
    from_env: bool

    def __str__(self) -> str:
        where = f"from {self.variable}" if self.from_env else f"the CI seed; {self.variable}=<n> draws another"
        return f"seed {self.value} ({where}; {self.variable}={self.value} replays it)"


def campaign_seed(variable: str, ci_seed: int) -> CampaignSeed:
    """The seed of one campaign: `variable` when set in the environment, else `ci_seed`, so
    that CI runs the same campaign every time."""
    raw = os.environ.get(variable, "").strip()
    return CampaignSeed(int(raw) if raw else ci_seed, variable, bool(raw))


def classify(stderr: str, before: JobState, after: JobState, tasks_started: bool) -> str:
    """Which step of the job a kill interrupted, from the run's log, its process tree (PySpark
    workers seen: tasks ran), and the batch state in ZooKeeper before the run and right after
    the kill. A step counts as reached when this run moved the batch there (or, for writing,
    when its tasks ran); a state left open by an earlier kill is not this run's progress."""
    if ZK_CONNECTED not in stderr:
        return "process start-up (before ZooKeeper)"
    if SPARK_STARTED not in stderr:
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
    anchor: str
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
            return (f"run {self.index}: delay {self.delay:6.2f}s after {self.anchor} -> run finished first "
                    f"(rc {self.returncode}), last batch {self.batch_id} {self.state}")
        return (f"kill {self.index}: delay {self.delay:6.2f}s after {self.anchor} -> rc {self.returncode}, "
                f"ZooKeeper: batch "
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


def kill_campaign(config: Path | str, zk, source: DataSource, warehouse_dir: Path | str | Callable[[], Path], *,
                  kills: int,
                  seed: int, baseline_seconds: float, read_table: Callable | None = None,
                  produce_per_partition: tuple[int, int] = (40, 160), min_backlog: int = 0,
                  max_backlog: int | None = None,
                  log: Callable[[str], None] = print, run_timeout: float = 600,
                  every: int = 0, checkpoint: Callable[[int], None] | None = None,
                  hive_check_every: int = 1) -> CampaignReport:
    """SIGKILL `etl run` at random moments until `kills` runs were really killed.

    Half the runs (drawn from the seed) are killed after a delay drawn uniformly from
    [0, 1.2 x baseline_seconds] (a normal run's duration) counted from the process start, so
    kills land in start-up, Hive set-up and the batches; the other half after a delay from
    [0, 0.3 x baseline_seconds] counted from the run's first batch line (planned or resumed, Spark up), so
    that kills land in batches in flight however long start-up takes on a loaded machine (a CI
    run once had all 12 kills in start-up and Hive set-up). Runs that finish first are simply
    complete runs. Before a run, more records are produced sometimes (always when nothing is
    left to load). After every kill the invariants that must hold at any moment are checked
    (`check_interim`), then the dead run's lock is waited out. Nothing is recovered here: call
    `recover_or_run` and the oracle after (or pass `checkpoint`, called with the kill count
    after every `every` kills). The table is read through Hive in that check after every
    `hive_check_every`-th run (disk and ZooKeeper are checked after every run).
    Records are always produced while the backlog (produced, not committed) is below
    `min_backlog`, so that runs stay about as long as the baseline run, and never while it is
    at least `max_backlog`. `warehouse_dir` may be a function that returns a fresh local copy
    of the warehouse (one on HDFS: tests.harness.hdfs.copy_to_local), called for every check.
    """
    rng, data_rng = random.Random(seed), random.Random(seed + 1)  # kill delays do not depend on the data
    report = CampaignReport(seed, baseline_seconds)
    started = time.monotonic()
    index = 0
    log(f"[campaign] seed={seed} kills={kills} baseline={baseline_seconds:.1f}s; delays drawn from "
        f"[0, {START_DELAY_SHARE * baseline_seconds:.1f}]s after the process start or "
        f"[0, {BATCH_DELAY_SHARE * baseline_seconds:.1f}]s after "
        f"the first batch line (the delays depend on the seed only)")
    while len(report.kills) < kills:
        index += 1
        before = job_state(config)
        backlog = sum(end - before.committed.get(key, 0) for key, end in source.ends().items())
        coin, n = data_rng.random(), data_rng.randint(*produce_per_partition)  # drawn every time: replayable
        if backlog == 0 or backlog < min_backlog or coin < 0.4 and (max_backlog is None or backlog < max_backlog):
            report.produced += source.produce(n)
            log(f"[campaign] produced {n} more records per partition (backlog was {backlog})")
        anchor = BATCH_ANCHOR if rng.random() < 0.5 else START_ANCHOR
        delay = rng.uniform(0, (BATCH_DELAY_SHARE if anchor == BATCH_ANCHOR else START_DELAY_SHARE) * baseline_seconds)
        proc = EtlProcess(config, "run", "-v")
        deadline = _anchor_moment(proc, anchor, run_timeout) + delay
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
        on_disk = warehouse_dir() if callable(warehouse_dir) else warehouse_dir  # a warehouse on HDFS: a fresh copy
        interim = check_interim(through_hive, config, on_disk, source.produced)
        state = interim.state
        tasks_started = bool(proc.descendants_matching("pyspark.daemon"))
        phase = classify(proc.stderr, before, state, tasks_started) if killed else "completed"
        proc.close()
        lock_wait = wait_for_lock_release(zk, config) if killed else 0.0
        record = KillRecord(len(report.kills) + 1 if killed else index, delay, anchor, killed, code, phase,
                            state.label(), state.last_batch_id, lock_wait, len(orphans),
                            interim.visible_uncommitted)
        report.records.append(record)
        log(f"[campaign] {record.describe()}")
        if killed and every and checkpoint is not None and len(report.kills) % every == 0:
            checkpoint(len(report.kills))
    report.seconds = time.monotonic() - started
    return report


def _anchor_moment(proc: EtlProcess, anchor: str, timeout: float) -> float:
    """When the run's kill delay starts counting: its process start, or the moment its log shows
    a batch planned or resumed and its SparkContext started (or it exited without them, or
    `timeout` passed). A resumed batch is named before Spark starts: counted from that line
    alone, 5 of one CI campaign's 6 kills fell in the Spark start-up of the same open batch."""
    if anchor == START_ANCHOR:
        return proc.started
    deadline = proc.started + timeout
    while not _in_a_batch(proc.stderr) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return time.monotonic()


def _in_a_batch(log: str) -> bool:
    return bool(_BATCH_LINE.search(log)) and SPARK_STARTED in log


# Zones whose hours turn at three different minutes of the UTC hour (:00, :30, :15), without
# summer time: one of them always has at least 30 minutes left in its hour.
_HOUR_ZONES = ("UTC", "Asia/Kolkata", "Asia/Kathmandu")


def zone_whose_hour_lasts(seconds: float) -> str:
    """A `[hive] partition_timezone` whose current hour has at least `seconds` left, so that the
    batches of the next `seconds` all plan into one `dt/hour` partition. A campaign that compacts
    one planning-time partition round after round finds nothing to compact once the hour turns (a
    two-worker suite's run at 06:00 did); waiting for the next UTC hour cost up to 5 minutes."""
    now = dt.datetime.now(dt.timezone.utc)

    def left_in_hour(zone: str) -> float:
        local = now.astimezone(zoneinfo.ZoneInfo(zone))
        return 3600 - (local.minute * 60 + local.second + local.microsecond / 1e6)

    zone = max(_HOUR_ZONES, key=left_in_hour)
    assert left_in_hour(zone) >= seconds, f"no zone has {seconds:.0f}s left in its hour"  # at most 1,800 s
    return zone
