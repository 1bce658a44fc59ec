"""The same seeded SIGKILL campaign for our job and for the peer (Spark's own Kafka source and
file sink, tests/perf/peer_job.py), each counted after every kill and at the end through three
readers: Hive (the metastore table), DuckDB (a glob over the folder) and Spark reading the folder.

Spark's file sink lists the files of its committed batches in `<output>/_spark_metadata`; only
`spark.read.parquet(<output>)` reads that log. Hive and DuckDB list the partition folders, so
what a killed micro-batch left there (partial files, whole files of a batch that is then run
again) is theirs to see. Our job writes `_tmp.<uuid>.<final>.inprogress` files beside their
final names and renames them when the batch is published; readers that skip `_` names (Hive,
Spark) never see them, nor does a `*.parquet` glob (before the suffix, DuckDB's glob did), and
this module reports what it saw without filtering.

A kill is a SIGKILL of every process group of the run (EtlProcess.kill: the driver, its JVM,
the PySpark workers), at a delay drawn from the seed: from [0, 1.2 x the baseline run] after the
process start, or (half the time) from [0, 0.5 x the baseline run] after the first sign of work
(our job: a batch line in its log; the peer: a new micro-batch in its checkpoint's offsets log),
as tests.harness.campaign.kill_campaign draws them. Records are produced between runs as it does.

With --crash-peer flink (or both), Flink's job (tests/perf/flink_crash.py) runs the same campaign:
an unbounded job, each run a JVM restarted from its newest retained checkpoint.
"""
from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from tests.harness.campaign import BATCH_ANCHOR, START_ANCHOR, _BATCH_LINE, classify
from tests.harness.data import DataSource
from tests.harness.etl_process import EtlProcess, ProcessTree, _runs_root, die_with_us
from tests.harness.oracle import check_interim
from tests.harness.paths import REPO
from tests.harness.recovery import recover_or_run
from tests.harness.state import job_state, wait_for_lock_release
from tests.harness.warehouse_files import table_root

# "duckdb" is the glob as written; "duckdb-skip_" the same files less those whose name starts with
# '_' or '.' (what Hive and Spark skip), so that what the in-flight files add shows apart.
READERS = ("hive", "duckdb", "duckdb-skip_", "spark")

# One reader's rows against the committed ends, aggregated where the rows are (Spark or DuckDB),
# so that millions of rows are never collected. The topics are fresh and produced without gaps,
# so the offsets below a partition's end are exactly the committed ones.
TALLY_SQL = """
SELECT coalesce(sum(g.c), 0) AS n_rows,
       coalesce(sum(CASE WHEN g.c > 1 THEN 1 ELSE 0 END), 0) AS duplicates,
       coalesce(sum(CASE WHEN g.kafka_offset < coalesce(e.end_offset, 0) THEN 1 ELSE 0 END), 0) AS below,
       coalesce(sum(CASE WHEN g.kafka_offset >= coalesce(e.end_offset, 0) THEN 1 ELSE 0 END), 0) AS beyond
FROM (SELECT kafka_topic, kafka_partition, kafka_offset, count(*) AS c FROM {rows} GROUP BY 1, 2, 3) g
LEFT JOIN {ends} e ON g.kafka_topic = e.kafka_topic AND g.kafka_partition = e.kafka_partition
"""
ENDS_SCHEMA = "kafka_topic string, kafka_partition int, end_offset bigint"


@dataclass
class Count:
    """What one reader saw at one moment, against what the job had committed (after a kill) or
    against everything produced (at the end, when all is committed)."""

    reader: str
    rows: int = 0
    duplicates: int = 0  # offsets seen more than once
    missing: int = 0  # committed offsets the reader does not see
    uncommitted: int = 0  # distinct offsets the reader sees beyond the job's committed ones
    unreadable: int = 0  # files the reader could not read (DuckDB: tried file by file)
    files: int = 0  # DuckDB: the data files its glob matched
    hidden_globbed: int = 0  # DuckDB: matches whose name starts with '_' or '.' (temp, in-flight)
    unreadable_sizes: list[int] = field(default_factory=list)  # DuckDB: their sizes in bytes (0: created, empty)
    error: str | None = None  # the reader's whole query failed (counts then come from a lenient retry)

    def cell(self) -> str:
        sizes = f" ({'/'.join(map(str, self.unreadable_sizes))} bytes)" if self.unreadable_sizes else ""
        text = f"dup {self.duplicates}, missing {self.missing}, unreadable {self.unreadable}{sizes}"
        return text + (" (query FAILED)" if self.error else "")


@dataclass(frozen=True)
class Committed:
    """The offsets a job had committed: each partition's end, and how many offsets lie below."""

    ends: dict
    offsets: int

    @classmethod
    def of(cls, produced: Counter, ends: dict) -> "Committed":
        return cls(dict(ends), sum(1 for k in produced if k[2] < ends.get((k[0], k[1]), 0)))

    def rows(self) -> list[tuple[str, int, int]]:
        return [(topic, int(partition), int(end)) for (topic, partition), end in sorted(self.ends.items())]


def counted(reader: str, tally: tuple, committed: Committed, **extra) -> Count:
    n_rows, duplicates, below, beyond = (int(v) for v in tally)
    return Count(reader, rows=n_rows, duplicates=duplicates, missing=committed.offsets - below, uncommitted=beyond,
                 **extra)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:300] if text else ''}"


def spark_tally(spark, load: Callable[[], Any], committed: Committed) -> tuple[tuple, str | None]:
    """TALLY_SQL over the DataFrame `load()` returns; when that query fails (a partial Parquet
    file), the error and the tally of a retry that skips corrupt files."""
    spark.createDataFrame(committed.rows(), ENDS_SCHEMA).createOrReplaceTempView("crash_compare_ends")

    def tally() -> tuple:
        load().createOrReplaceTempView("crash_compare_rows")
        return tuple(spark.sql(TALLY_SQL.format(rows="crash_compare_rows", ends="crash_compare_ends")).first())

    try:
        return tally(), None
    except Exception as exc:  # the reader's outcome: reported, then counted leniently
        error = _first_line(exc)
    spark.conf.set("spark.sql.files.ignoreCorruptFiles", "true")
    try:
        return tally(), error
    finally:
        spark.conf.unset("spark.sql.files.ignoreCorruptFiles")


def read_hive(spark, table: str, committed: Committed, repair: bool) -> tuple[tuple, str | None]:
    """The metastore table, as Hive users read it (MSCK REPAIR TABLE first for the peer, whose
    users' schedule runs it after each run; REFRESH so that no cached listing is read)."""
    if repair:
        spark.sql(f"MSCK REPAIR TABLE {table}")
    spark.sql(f"REFRESH TABLE {table}")
    return spark_tally(spark, lambda: spark.table(table), committed)


def read_spark_folder(spark, folder: Path, committed: Committed) -> tuple[tuple, str | None]:
    """spark.read.parquet(folder): through `_spark_metadata` when the folder has one."""
    if not folder.exists():
        return (0, 0, 0, 0), None
    return spark_tally(spark, lambda: spark.read.parquet(str(folder)), committed)


def read_duckdb(folder: Path, committed: Committed) -> tuple[Count, Count]:
    """DuckDB over `<folder>/**/*.parquet` with hive_partitioning: the whole glob once (its
    error, if any, is the outcome a user gets), every matched file on its own to find the
    unreadable ones, then the readable ones counted; and the same without '_'/'.' names."""
    import duckdb
    if not folder.exists():
        return Count("duckdb"), Count("duckdb-skip_")
    pattern = f"{folder}/**/*.parquet"
    con = duckdb.connect()
    try:
        files = [row[0] for row in con.execute("SELECT file FROM glob(?)", [pattern]).fetchall()]
        error = None
        if files:
            try:
                con.execute("SELECT count(*) FROM read_parquet(?, hive_partitioning = true)", [pattern]).fetchall()
            except duckdb.Error as exc:
                error = _first_line(exc)
        unreadable = set()
        for path in files:
            try:
                con.execute("SELECT count(*) FROM read_parquet(?)", [path]).fetchall()
            except duckdb.Error:
                unreadable.add(path)
        hidden = {f for f in files if Path(f).name.startswith(("_", "."))}
        con.execute(f"CREATE TEMP TABLE ends ({ENDS_SCHEMA})")
        if committed.ends:
            con.executemany("INSERT INTO ends VALUES (?, ?, ?)", committed.rows())

        def tally(chosen: list[str]) -> tuple:
            if not chosen:
                return (0, 0, 0, 0)
            listed = ", ".join("'" + f.replace("'", "''") + "'" for f in chosen)
            row = con.execute(TALLY_SQL.format(rows=f"read_parquet([{listed}])", ends="ends")).fetchone()
            assert row is not None  # an aggregate without GROUP BY has one row
            return tuple(row)

        readable = [f for f in files if f not in unreadable]
        return (counted("duckdb", tally(readable), committed, unreadable=len(unreadable), files=len(files),
                        hidden_globbed=len(hidden), error=error,
                        unreadable_sizes=sorted(Path(f).stat().st_size for f in unreadable)),
                counted("duckdb-skip_", tally([f for f in readable if f not in hidden]), committed,
                        unreadable=len(unreadable - hidden), files=len(files) - len(hidden)))
    finally:
        con.close()


def count_all(job: "Job", spark, produced: Counter, ends: dict) -> dict[str, Count]:
    """The readers' counts against the offsets below `ends`."""
    committed = Committed.of(produced, ends)
    hive, hive_error = job.read_hive(spark, committed)
    duck, duck_visible = read_duckdb(job.folder, committed)
    folder, folder_error = read_spark_folder(spark, job.folder, committed)
    return {"hive": counted("hive", hive, committed, error=hive_error), "duckdb": duck, "duckdb-skip_": duck_visible,
            "spark": counted("spark", folder, committed, error=folder_error)}


# -- the two jobs --------------------------------------------------------------------------
class Job(Protocol):
    name: str
    folder: Path

    def start(self) -> EtlProcess: ...

    def work_started(self, proc: EtlProcess, mark: Any) -> bool: ...

    def mark(self) -> Any: ...

    def committed_ends(self) -> dict: ...

    def read_hive(self, spark, committed: Committed) -> tuple[tuple, str | None]: ...

    def after_run(self, proc: EtlProcess, killed: bool, mark: Any, produced: Counter) -> str: ...

    def finish(self) -> float: ...


class OurJob:
    """`etl -v run` on a job config; its committed offsets are in ZooKeeper."""

    name = "etl (ours)"

    def __init__(self, config: Path, zk):
        from etl.config import load_config
        cfg = load_config(config)
        self.config, self.zk = config, zk
        self.database, self.table = cfg.hive.database, cfg.hive.table
        self.warehouse = Path(cfg.warehouse.url.removeprefix("file://"))
        self.folder = table_root(self.warehouse, self.database, self.table)

    def start(self) -> EtlProcess:
        return EtlProcess(self.config, "run", "-v")

    def mark(self) -> Any:
        return job_state(self.config)

    def work_started(self, proc: EtlProcess, mark: Any) -> bool:
        return bool(_BATCH_LINE.search(proc.stderr))

    def committed_ends(self) -> dict:
        return job_state(self.config).committed

    def read_hive(self, spark, committed: Committed) -> tuple[tuple, str | None]:
        return read_hive(spark, f"`{self.database}`.`{self.table}`", committed, repair=False)

    def after_run(self, proc: EtlProcess, killed: bool, mark: Any, produced: Counter) -> str:
        """The harness's interim invariants on disk and in ZooKeeper, the interrupted step, and
        the dead run's lock waited out."""
        interim = check_interim(None, self.config, self.warehouse, produced)
        phase = "completed"
        if killed:
            phase = classify(proc.stderr, mark, interim.state, bool(proc.descendants_matching("pyspark.daemon")))
            wait_for_lock_release(self.zk, self.config)
        return phase

    def finish(self) -> float:
        return recover_or_run(self.config).seconds


class PeerProcess(EtlProcess):
    """The peer job as a scheduler runs it: a whole process in its own session, killed and
    reaped like an `etl` run (EtlProcess's kill, reap and output handling)."""

    def __init__(self, argv: list[str]):  # EtlProcess's attributes, another command line
        self.config, self.command, self.fault, self.action = Path(argv[-1]), "peer-job", None, None
        self._dir = Path(tempfile.mkdtemp(prefix="peer-run-", dir=_runs_root()))
        self._output: tuple[str, str] | None = None
        self.stdout_path, self.stderr_path = self._dir / "stdout", self._dir / "stderr"
        with open(self.stdout_path, "ab") as out, open(self.stderr_path, "ab") as err:
            self.started = time.monotonic()
            self.popen = subprocess.Popen(die_with_us(argv), stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                          start_new_session=True, cwd=REPO)
        self.pid = self.popen.pid
        self.ended: float | None = None
        self.tree = ProcessTree(self.popen)

    @property
    def name(self) -> str:
        return "peer job run"


@dataclass(frozen=True)
class PeerMark:
    """The peer's logs and files at one moment: batches in the checkpoint's offsets and commits
    logs and in the sink's `_spark_metadata`, and the data files under the output folder."""

    offsets: list[int]
    commits: list[int]
    sink: list[int]
    files: frozenset[str]


PEER_MODULE = [sys.executable, "-m", "tests.perf.peer_job"]


class PeerJob:
    """tests/perf/peer_job.py: Spark's Kafka source, from_json, the Parquet file sink with a
    checkpoint and trigger(availableNow=True), an external Hive table over its output. Its
    committed offsets are those of the last micro-batch in the checkpoint's commits log."""

    name = "peer (Spark file sink)"

    def __init__(self, bootstrap: str, topic: str, work: Path, table: str, metastore: str, parallelism: int = 2,
                 command: list[str] | None = None):
        self.topic, self.table = topic, table
        self.folder, self.checkpoint = work / "output", work / "checkpoint"
        self.argv = [*(command or PEER_MODULE), "--bootstrap", bootstrap, "--topic", topic, "--output",
                     str(self.folder), "--parallelism", str(parallelism), "--table", table, "--metastore", metastore,
                     "--checkpoint", str(self.checkpoint)]

    def start(self) -> EtlProcess:
        return PeerProcess(self.argv)

    def _batches(self, log: str) -> list[int]:
        folder = self.checkpoint / log
        return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit()) if folder.exists() else []

    def _sink_batches(self) -> list[int]:
        folder = self.folder / "_spark_metadata"
        names = [p.name.removesuffix(".compact") for p in folder.iterdir()] if folder.exists() else []
        return sorted(int(n) for n in names if n.isdigit())

    def _data_files(self) -> frozenset[str]:
        return frozenset(str(p) for p in self.folder.rglob("*.parquet")) if self.folder.exists() else frozenset()

    def mark(self) -> "PeerMark":
        return PeerMark(self._batches("offsets"), self._batches("commits"), self._sink_batches(), self._data_files())

    def work_started(self, proc: EtlProcess, mark: Any) -> bool:
        """A micro-batch planned (a new entry in the offsets log) or, for the rerun of a killed
        batch (which plans nothing new), its first file created."""
        return self._batches("offsets") != mark.offsets or self._data_files() != mark.files

    def committed_ends(self) -> dict:
        commits = self._batches("commits")
        if not commits:
            return {}
        lines = (self.checkpoint / "offsets" / str(commits[-1])).read_text().splitlines()
        source = json.loads(lines[-1])  # one source: {topic: {partition: next offset}}
        return {(topic, int(p)): int(end) for topic, ends in source.items() for p, end in ends.items()}

    def read_hive(self, spark, committed: Committed) -> tuple[tuple, str | None]:
        if not spark.catalog.tableExists(self.table):  # every run so far was killed before creating it
            return (0, 0, 0, 0), "no table yet"
        return read_hive(spark, self.table, committed, repair=True)

    def after_run(self, proc: EtlProcess, killed: bool, mark: Any, produced: Counter) -> str:
        """Where the kill landed, from the checkpoint's and the sink's logs and the files that
        appeared during the run."""
        if not killed:
            return "completed"
        now = self.mark()
        written = len(now.files - mark.files)
        if not now.offsets or (now.offsets == mark.offsets and now.offsets[-1] in now.commits and not written):
            return "start-up (no micro-batch planned)"
        last, again = now.offsets[-1], " again (a killed batch)" if now.offsets == mark.offsets else ""
        if last not in now.sink:
            if not written:
                return f"start-up, batch {last} planned{again}, no file yet"
            return f"writing files: batch {last}{again}, {written} files created, not in _spark_metadata"
        if last not in now.commits:
            return "sink committed, checkpoint commit not written"
        return "after the batch (table, MSCK REPAIR, shutdown)"

    def finish(self) -> float:
        return clean_run(self, "the final run")


# -- the campaign --------------------------------------------------------------------------
@dataclass
class RunRecord:
    index: int
    delay: float
    anchor: str
    killed: bool
    returncode: int
    phase: str
    counts: dict[str, Count]

    def describe(self) -> str:
        what = (f"kill {self.index}: {self.delay:5.2f}s after {self.anchor} -> rc {self.returncode}, {self.phase}"
                if self.killed else f"run {self.index}: finished before its kill ({self.delay:5.2f}s after "
                                    f"{self.anchor}), rc {self.returncode}")
        seen = "; ".join(f"{name}: {c.cell()}" + (f", {c.uncommitted} uncommitted visible" if c.uncommitted else "")
                         for name, c in self.counts.items())
        return f"{what} | {seen}"


@dataclass
class JobCampaign:
    job: str
    seed: int
    baseline_seconds: float
    records: list[RunRecord] = field(default_factory=list)
    final: dict[str, Count] = field(default_factory=dict)
    final_run_seconds: float = 0.0
    produced: int = 0
    seconds: float = 0.0

    @property
    def kills(self) -> list[RunRecord]:
        return [r for r in self.records if r.killed]

    def worst(self, reader: str) -> Count:
        """The worst interim figure of each kind over the kills (not necessarily one moment)."""
        counts = [r.counts[reader] for r in self.kills]
        worst = Count(reader)
        for name in ("duplicates", "missing", "uncommitted", "unreadable", "hidden_globbed"):
            setattr(worst, name, max((getattr(c, name) for c in counts), default=0))
        failed = [c.error for c in counts if c.error]
        worst.error = f"{len(failed)} of {len(counts)} reads failed, e.g. {failed[0]}" if failed else None
        return worst

    def to_json(self) -> dict:
        return {"job": self.job, "seed": self.seed, "baseline_seconds": self.baseline_seconds,
                "kills": len(self.kills), "runs": len(self.records), "produced": self.produced,
                "seconds": self.seconds, "final_run_seconds": self.final_run_seconds,
                "worst_interim": {r: asdict(self.worst(r)) for r in READERS},
                "final": {r: asdict(c) for r, c in self.final.items()},
                "records": [{**asdict(r), "line": r.describe()} for r in self.records]}


def baseline(job: Job) -> float:
    """One clean run (the first data), whose duration sets the kill delays' range."""
    return clean_run(job, "the baseline run")


def clean_run(job: Job, what: str) -> float:
    """One run of `job` left to finish; its seconds, or an AssertionError if it failed."""
    proc = job.start()
    code = proc.wait(600)
    proc.reap(2.0)
    proc.close()
    if code != 0:
        raise AssertionError(f"{job.name}: {what} failed (rc {code})\n{proc.describe()}")
    return proc.seconds


def campaign(job: Job, source: DataSource, spark, *, kills: int, seed: int, baseline_seconds: float,
             produce_per_partition: tuple[int, int] = (40, 160), min_backlog: int = 0,
             max_backlog: int | None = None, log: Callable[[str], None] = print,
             run_timeout: float = 600) -> JobCampaign:
    """kill_campaign's loop for any job: SIGKILL runs until `kills` were really killed, count
    through the three readers after every run, then one clean run and the final counts."""
    rng, data_rng = random.Random(seed), random.Random(seed + 1)  # as kill_campaign draws them
    result = JobCampaign(job.name, seed, baseline_seconds)
    started, index = time.monotonic(), 0
    while len(result.kills) < kills:
        index += 1
        ends = job.committed_ends()
        backlog = sum(end - ends.get(key, 0) for key, end in source.ends().items())
        coin, n = data_rng.random(), data_rng.randint(*produce_per_partition)
        if backlog == 0 or backlog < min_backlog or coin < 0.4 and (max_backlog is None or backlog < max_backlog):
            result.produced += source.produce(n)
        anchor = BATCH_ANCHOR if rng.random() < 0.5 else START_ANCHOR
        delay = rng.uniform(0, (0.5 if anchor == BATCH_ANCHOR else 1.2) * baseline_seconds)
        mark = job.mark()
        proc = job.start()
        deadline = _anchor_moment(job, proc, mark, anchor, run_timeout) + delay
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
        killed = proc.kill()
        code = proc.wait(run_timeout)
        proc.reap(grace=2.0)
        if killed and code != -signal.SIGKILL:
            killed = False  # it exited between the check and the signal
        if not killed and code != 0:
            raise AssertionError(f"{job.name}: run {index} failed on its own (rc {code})\n{proc.describe()}")
        phase = job.after_run(proc, killed, mark, source.produced)
        proc.close()
        counts = count_all(job, spark, source.produced, job.committed_ends())
        record = RunRecord(len(result.kills) + 1 if killed else index, delay, anchor, killed, code, phase, counts)
        result.records.append(record)
        log(f"[{job.name}] {record.describe()}")
    result.final_run_seconds = job.finish()
    result.final = count_all(job, spark, source.produced, source.ends())
    result.seconds = time.monotonic() - started
    log(f"[{job.name}] final run {result.final_run_seconds:.1f}s | "
        + "; ".join(f"{name}: {c.cell()}" for name, c in result.final.items()))
    return result


def _anchor_moment(job: Job, proc: EtlProcess, mark: Any, anchor: str, timeout: float) -> float:
    if anchor == START_ANCHOR:
        return proc.started
    deadline = proc.started + timeout
    while not job.work_started(proc, mark) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return time.monotonic()


def render(campaigns: list[JobCampaign]) -> str:
    """Per job x reader: duplicates, missing, unreadable files, the worst after a kill and at
    the end; then every run's line."""
    lines = ["crash comparison: the same seeded SIGKILL campaign, counted through three readers",
             "  interim = worst after any kill (missing = committed offsets not seen; uncommitted = seen beyond the "
             "job's committed offsets); final = after a clean run, against everything produced",
             f"  {'job':<24} {'reader':<12} | {'interim dup':>11} {'missing':>8} {'uncommit':>8} {'unread':>6} "
             f"{'failed':>6} | {'final dup':>9} {'missing':>8} {'unread':>6} {'failed':>6}"]
    for c in campaigns:
        for reader in READERS:
            w, f = c.worst(reader), c.final[reader]
            failed = sum(1 for r in c.kills if r.counts[reader].error)
            lines.append(f"  {c.job:<24} {reader:<12} | {w.duplicates:>11} {w.missing:>8} {w.uncommitted:>8} "
                         f"{w.unreadable:>6} {failed:>6} | {f.duplicates:>9} {f.missing:>8} {f.unreadable:>6} "
                         f"{'yes' if f.error else 'no':>6}")
    for c in campaigns:
        hidden = max((r.counts['duckdb'].hidden_globbed for r in c.records), default=0)
        lines.append(f"{c.job}: seed {c.seed}, {len(c.kills)} SIGKILLs in {len(c.records)} runs, baseline run "
                     f"{c.baseline_seconds:.1f}s, campaign {c.seconds:.0f}s, {c.produced} records produced in it; "
                     f"DuckDB's glob matched up to {hidden} '_'/'.' files after a kill")
        lines += [f"  {r.describe()}" for r in c.records]
        errors = {f"{r}: {c.final[r].error}" for r in READERS if c.final[r].error}
        lines += [f"  final read failed: {e}" for e in sorted(errors)]
    return "\n".join(lines)


# -- the bench mode ------------------------------------------------------------------------
@dataclass(frozen=True)
class Scale:
    """How much data a campaign moves: records per partition before the baseline run, the range
    drawn for each production between runs (kill_campaign's rule), and our job's
    max_records_per_partition. The backlog is kept between 1x and 2x the first load, as
    test_crash keeps it, so that runs stay about as long as the baseline run."""

    first: int
    per_run: tuple[int, int]
    batch_rows: int


TEST_SCALE = Scale(150, (40, 160), 50)  # test_crash's: 3 batches of 50 per partition in the baseline run
# The bench's: batches big enough that a kill can land while files are written (a micro-batch
# of a few hundred records is written in a blink, and the peer writes one per run).
BENCH_SCALE = Scale(20_000, (10_000, 40_000), 10_000)


def our_tuning(scale: Scale):
    from tests.harness.config_file import JobTuning
    # A 4 s ZooKeeper session (the server's minimum), as tests/integration/test_crash.py: a dead
    # run's lock goes quickly.
    return JobTuning(session_timeout_seconds=4, max_rejected_ratio=0.5, max_records_per_partition=scale.batch_rows)


def run_both(ours: Job, peer: Job, make_source: Callable[[str], DataSource], spark, *, kills: int, seed: int,
             scale: Scale, log: Callable[[str], None]) -> list[JobCampaign]:
    """Our job's campaign, then the peer's, on the same seed and scale."""
    return run_jobs([ours, peer], make_source, spark, kills=kills, seed=seed, scale=scale, log=log)


def run_jobs(jobs: list, make_source: Callable[[str], DataSource], spark, *, kills: int, seed: int, scale: Scale,
             log: Callable[[str], None]) -> list[JobCampaign]:
    """Each job's campaign in turn, on the same seed and scale. A job with a `baseline_run(source)`
    (Flink's, which never ends by itself) runs its own baseline."""
    results = []
    for job in jobs:
        source = make_source(job.name)
        source.produce(scale.first)
        seconds = job.baseline_run(source) if hasattr(job, "baseline_run") else baseline(job)
        log(f"[{job.name}] baseline run {seconds:.1f}s; kills drawn from seed {seed}")
        results.append(campaign(job, source, spark, kills=kills, seed=seed, baseline_seconds=seconds,
                                produce_per_partition=scale.per_run, min_backlog=scale.first * source.partitions,
                                max_backlog=2 * scale.first * source.partitions, log=log))
    return results


def crash_compare_bench(bench) -> None:
    """scripts/bench.py --crash-compare: our job's campaign and the peers' (--crash-peer: Spark's
    file sink, Flink's, or both) in fresh topics, folders, tables and ZooKeeper root; the report's
    "crash_compare" entry (its "table" is the text)."""
    import functools

    from tests.harness import kafka
    from tests.harness.config_file import write_config
    from tests.harness.spark import tests_session
    from tests.perf.common import say
    from tests.perf.context import zk_client
    from tests.perf.flink_crash import FlinkJob
    from tests.perf.flink_peer import compile_job, hidden_files, unavailable

    args, stack = bench.args, bench.stack
    peers = ("spark", "flink") if args.crash_peer == "both" else (args.crash_peer,)
    skipped = unavailable() if "flink" in peers else None
    if skipped:
        say(f"the Flink peer is skipped: {skipped}")
        peers = tuple(p for p in peers if p != "flink")
    elif "flink" in peers:
        compile_job()
    bench.spark = tests_session(stack)  # the readers' one small session; cleanup drops the tables with it
    produce = functools.partial(kafka.produce, bootstrap=stack.kafka_bootstrap)
    topics = {who: bench.new_topic(4, f"crash-{who}") for who in ("ours", *peers)}
    tables = {who: f"b{bench.run_id[-6:]}_crash_{'peer' if who == 'spark' else who}" for who in topics}
    bench.tables += list(tables.values())
    config = write_config(bench.work / "crash-ours.ini", stack, job_name="bench-crash-ours",
                          zk_root=f"{bench.zk_root}/crash-ours", warehouse_dir=bench.work / "warehouse",
                          table=tables["ours"], tuning=our_tuning(BENCH_SCALE), database=bench.database,
                          kafka={"topics": topics["ours"]})
    zk = zk_client(stack)
    try:
        jobs: list = [OurJob(config, zk)]
        if "spark" in peers:
            jobs.append(PeerJob(stack.kafka_bootstrap, topics["spark"], bench.work / "peer",
                                f"{bench.database}.{tables['spark']}", stack.metastore_uri,
                                parallelism=args.parallelism))
        if "flink" in peers:
            jobs.append(FlinkJob(stack.kafka_bootstrap, topics["flink"], bench.work / "flink",
                                 f"{bench.database}.{tables['flink']}", parallelism=args.parallelism))
        topic_of = {job.name: topics[who] for job, who in zip(jobs, ("ours", *peers))}
        results = run_jobs(jobs, lambda name: DataSource(topic_of[name], 4, produce), bench.spark,
                           kills=args.crash_kills, seed=args.seed, scale=BENCH_SCALE, log=say)
    finally:
        zk.stop()
        zk.close()
    report = {"seed": args.seed, "kills_per_job": args.crash_kills, "scale": asdict(BENCH_SCALE),
              "peers": list(peers), "flink_skipped": skipped,
              "campaigns": [c.to_json() for c in results], "table": render(results)}
    flink = next((job for job in jobs if isinstance(job, FlinkJob)), None)
    if flink is not None:
        report["flink_hidden_files_after_each_run"] = flink.hidden_after
        report["flink_hidden_files_at_end"] = hidden_files(flink.folder)
        report["table"] += (f"\n{flink.name}: hidden .part files at the end "
                            f"{report['flink_hidden_files_at_end']}; after each run: "
                            + ", ".join(f"{h['in_progress']}+{h['complete_pending']}" for h in flink.hidden_after)
                            + " (in progress or cut + closed pending)")
    bench.report["crash_compare"] = report
