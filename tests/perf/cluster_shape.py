"""The seeds' shape (545,884 records in 18 partitions, one 5-minute batch of the system the
design comes from) as one `spark-submit` of scripts/run_etl.py per run, as a scheduler starts it,
on each cluster manager in the same bench run: `local[2]`, the standalone cluster of
`scripts/local-stack up spark` (two 1-core Workers) and the YARN of `scripts/local-stack up yarn`
(one NodeManager), in client and in cluster mode, and on YARN again with the archive put once on
its HDFS (`yarn-client-hdfs`, `yarn-cluster-hdfs`; not in the default --cluster-managers).

Every submission ships the packed environment (scripts/pack-env) with `--archives`, as
docs/cluster.md says, and every one writes the same kind of warehouse (local files of this
machine), so that what differs is the cluster manager. Each repetition produces the shape's
records anew and times the whole spark-submit process; the batch's own time (plan stored to
commit) is what the job reports. Spark's event log says where the rest goes:

  to SparkContext     process start -> the application's start (the JVM, spark-submit, and on
                      YARN the submission and, in cluster mode, the ApplicationMaster's container)
  in application      the application's start -> its end: the job's start-up checks, the Hive
                      table, the plan, the batch (which the job times itself) and the commit
  after application   the application's end -> the process's exit (shutdown, containers released)
and, inside the application,
  to executors        its start -> the last executor registered (containers, the archive
                      unpacked; none in local mode)
  python start        a Python worker's first task over its later ones (the worker forked, etl
                      imported from the archive), the median over executors

local[2] runs as a scheduler's local run does, where the job is installed (the edge node's
python, no archive); the clusters get the archive.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tests.harness.cluster_submit import SPARK_HOME, SparkSubmit, pack_env, spark_submit, unpack
from tests.harness.hdfs import Hdfs, shared_hdfs
from tests.harness.paths import REPO
from tests.perf.common import say, summarize
from tests.perf.context import BenchRun
from tests.perf.data import produce_checked, value_maker
from tests.perf.phases import check_loaded
from tests.perf.seeds_shape import SEEDS_PARTITIONS, SEEDS_RECORDS, _committed

# "-hdfs": the archive put once on YARN's HDFS, readable by all, and named by its URI (docs/cluster.md).
MANAGERS = ("local", "standalone", "yarn-client", "yarn-cluster", "yarn-client-hdfs", "yarn-cluster-hdfs")
STACK_ENV = REPO / ".stack" / "env"
# The same executors everywhere a cluster gives them: two of 1 core and 512 MB.
EXECUTORS = ("spark.executor.cores=1", "spark.executor.memory=512m", "spark.driver.memory=512m")
# One plain JSON Lines file per application (Spark 4 rolls and compresses event logs by default).
EVENT_LOG = ("spark.eventLog.enabled=true", "spark.eventLog.rolling.enabled=false", "spark.eventLog.compress=false")
YARN_SETTINGS = ("spark.executor.instances=2", "spark.yarn.am.memory=512m", "spark.yarn.maxAppAttempts=1",
                 f"spark.yarn.jars=local:{SPARK_HOME / 'jars' / '*'}")


@dataclass(frozen=True)
class Clusters:
    """Where the shared stack's clusters answer (scripts/local-stack up spark, up yarn)."""
    spark_master: str
    yarn_conf_dir: Path
    hdfs: Hdfs  # YARN's: the shared stack's


def start_clusters() -> Clusters:
    """Start the standalone cluster and YARN of the local stack (a no-op for what runs)."""
    for service in ("spark", "yarn"):
        done = subprocess.run([str(REPO / "scripts" / "local-stack"), "up", service], capture_output=True, text=True,
                              timeout=600)
        if done.returncode != 0:
            raise RuntimeError(f"scripts/local-stack up {service} failed:\n{done.stdout}\n{done.stderr}")
    env = dict(line.split("=", 1) for line in STACK_ENV.read_text().splitlines() if "=" in line)
    return Clusters(env["ETL_SPARK_MASTER_URL"], Path(env["ETL_YARN_CONF_DIR"]), shared_hdfs())


class Submitter:
    """The spark-submit line of each manager, with the packed environment and an event log."""

    def __init__(self, archive: Path, driver_python: Path, clusters: Clusters, event_log: Path):
        self.archive, self.driver_python, self.clusters, self.event_log = archive, driver_python, clusters, event_log
        self.hdfs_archive: str | None = None  # put there on the first "-hdfs" manager's submission
        event_log.mkdir(parents=True, exist_ok=True)

    def archive_for(self, manager: str) -> Path | str | None:
        if manager == "local":
            return None
        if manager.endswith("-hdfs"):
            self.hdfs_archive = self.hdfs_archive or self.clusters.hdfs.put_public(self.archive)
            return self.hdfs_archive
        return self.archive

    def command(self, manager: str, ini: Path) -> SparkSubmit:
        """local[2] runs as a scheduler's local run does, where the job is installed (the edge
        node's python, no archive); the clusters get the archive, YARN in either deploy mode."""
        settings = [*EXECUTORS, *EVENT_LOG, f"spark.eventLog.dir=file://{self.event_log}"]
        yarn = manager.startswith("yarn")
        master = {"local": "local[2]", "standalone": self.clusters.spark_master}.get(manager, "yarn")
        return spark_submit(master, ini, archive=self.archive_for(manager), driver_python=self.driver_python,
                            deploy_mode="cluster" if manager.startswith("yarn-cluster") else "client" if yarn else None,
                            conf=[*settings, *(YARN_SETTINGS if yarn else ())], args=("--json",),
                            hadoop_conf_dir=self.clusters.yarn_conf_dir if yarn else None, quiet_driver=False)


def cluster_shape(run: BenchRun) -> None:
    """Per manager, one job as a schedule runs it: a first run creates its tables (not timed),
    then each repetition produces the shape's records and times one spark-submit."""
    from etl.config import load_config
    archive = pack_env()
    driver_python = unpack(archive, run.work / "edge-node")
    submitter = Submitter(archive, driver_python, start_clusters(), run.work / "event-log")
    per = {p: SEEDS_RECORDS // SEEDS_PARTITIONS + (1 if p < SEEDS_RECORDS % SEEDS_PARTITIONS else 0)
           for p in range(SEEDS_PARTITIONS)}
    make = value_maker("json", run.args.record_bytes)
    managers = run.args.cluster_managers
    # A topic per manager's job, so that each run finds exactly its own repetition's records.
    topics = {m: run.new_topic(SEEDS_PARTITIONS, f"cluster-{m}") for m in managers}
    ends = {m: {p: 1 for p in per} for m in managers}
    inis = {m: run.ini(f"cluster-{m.replace('-', '_')}", [topics[m]], "json", max(per.values()) + 1)
            for m in managers}
    say(f"cluster shape: {SEEDS_RECORDS:,} JSON records in {SEEDS_PARTITIONS} partitions per run, on {managers}")
    for manager in managers:  # each job's first run, on a record per partition: its tables created
        produce_checked(run.stack.kafka_bootstrap, topics[manager], {p: 1 for p in per}, make)
        _check_exit(submit(submitter, manager, inis[manager])[0])
    times: dict[str, list[dict]] = {m: [] for m in managers}
    for rep in range(1, run.args.repeat + 1):
        for manager in managers:  # interleaved, so that a noisy minute hits every manager alike
            topic = topics[manager]
            produced = produce_checked(run.stack.kafka_bootstrap, topic, per, make, start=ends[manager])
            ranges = [(topic, p, ends[manager][p], high) for p, (_low, high) in sorted(produced["watermarks"].items())]
            ends[manager] = {p: high for p, (_low, high) in produced["watermarks"].items()}
            (done, phases), stats = run.measure(f"cluster shape on {manager} #{rep}",
                                                lambda m=manager: submit(submitter, m, inis[m]))
            committed = _committed(done)
            check_loaded(load_config(inis[manager]), ranges, SEEDS_RECORDS)
            times[manager].append({"process": stats["seconds"], "batch": committed["seconds"], **phases})
            say("  " + ", ".join(f"{k} {v:.2f}s" for k, v in times[manager][-1].items()))
    report = {"records": SEEDS_RECORDS, "partitions": SEEDS_PARTITIONS, "by_manager": {}}
    for manager, runs in times.items():
        report["by_manager"][manager] = {f"{key}_seconds": summarize([r[key] for r in runs]) for key in runs[0]}
    local = statistics.median(r["process"] for r in times["local"]) if "local" in times else None
    for manager, runs in times.items():
        if local:
            report["by_manager"][manager]["process_over_local_seconds"] = \
                statistics.median(r["process"] for r in runs) - local
    report["table"] = render_table(report)
    run.report["cluster_shape"] = report


COLUMNS = ("process", "over_local", "to_spark_context", "in_application", "batch", "after_application",
           "to_executors", "python_start")


def render_table(report: dict) -> str:
    """The medians, one row per manager, in seconds."""
    lines = [f"cluster shape: {report['records']:,} records in {report['partitions']} partitions, one spark-submit "
             "per run; medians in seconds", " ".join(f"{c:>17}" for c in ("manager", *COLUMNS))]
    for manager, entry in report["by_manager"].items():
        cells = [_median(entry, column) for column in COLUMNS]
        lines.append(" ".join([f"{manager:>17}", *(f"{cell:17.2f}" for cell in cells)]))
    return "\n".join(lines)


def _median(entry: dict, column: str) -> float:
    if column == "over_local":  # nan when the run measured no local[2]
        return entry.get("process_over_local_seconds", float("nan"))
    return entry[f"{column}_seconds"]["median"]


def submit(submitter: Submitter, manager: str, ini: Path) -> tuple[subprocess.CompletedProcess, dict]:
    """One spark-submit; its output (the driver's, from YARN's logs in cluster mode) and where its time went."""
    line = submitter.command(manager, ini)
    before = set(submitter.event_log.iterdir())
    started = time.time()
    done = subprocess.run(line.command, env=line.env, cwd=ini.parent, capture_output=True, text=True, timeout=900)
    ended = time.time()
    if manager.startswith("yarn-cluster"):
        done = subprocess.CompletedProcess(line.command, done.returncode, _driver_stdout(submitter, done), done.stderr)
    [log] = [p for p in set(submitter.event_log.iterdir()) - before if not p.name.endswith(".inprogress")] or [None]
    phases = _phases(log, started, ended) if log else {}
    return done, phases


def _driver_stdout(submitter: Submitter, done: subprocess.CompletedProcess) -> str:
    """Cluster mode: the driver's stdout is the ApplicationMaster container's, through `yarn logs`."""
    app_id = next((word.strip(".,") for word in (done.stdout + done.stderr).split() if word.startswith("application_")),
                  None)
    if app_id is None:
        raise RuntimeError(f"no application id in spark-submit's output:\n{done.stderr[-3000:]}")
    env = {**os.environ, "HADOOP_CONF_DIR": str(submitter.clusters.yarn_conf_dir)}
    deadline = time.monotonic() + 60
    while True:  # the NodeManager aggregates the logs to HDFS after the application ends
        logs = subprocess.run([str(REPO / "scripts" / "stack" / "yarn-cli"), "logs", "-applicationId", app_id,
                               "-log_files", "stdout"], env=env, capture_output=True, text=True, timeout=120)
        if logs.returncode == 0 and '"event"' in logs.stdout:
            return logs.stdout
        if time.monotonic() > deadline:
            raise RuntimeError(f"yarn logs for {app_id} failed:\n{logs.stdout[-2000:]}\n{logs.stderr[-2000:]}")
        time.sleep(2)


def _check_exit(done: subprocess.CompletedProcess) -> None:
    if done.returncode != 0:
        raise RuntimeError(f"spark-submit exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")


def _phases(event_log: Path, started: float, ended: float) -> dict[str, float]:
    """Where a submission's time went, from Spark's event log (epoch milliseconds)."""
    events = [json.loads(line) for line in event_log.read_text().splitlines() if line.strip()]
    app_start = next(e["Timestamp"] for e in events if e["Event"] == "SparkListenerApplicationStart") / 1000
    app_end = next(e["Timestamp"] for e in events if e["Event"] == "SparkListenerApplicationEnd") / 1000
    added = [e["Timestamp"] / 1000 for e in events
             if e["Event"] == "SparkListenerExecutorAdded" and e["Executor ID"] != "driver"]
    return {"to_spark_context": app_start - started, "in_application": app_end - app_start,
            "after_application": ended - app_end,
            "to_executors": (max(added) - app_start) if added else 0.0, "python_start": _python_start(events)}


def _python_start(events: list[dict]) -> float:
    """The widest stage's first task on each executor, over that executor's later tasks there:
    a Python worker's start (fork, imports) is paid by the first task it runs."""
    ends = [e for e in events if e["Event"] == "SparkListenerTaskEnd"]
    if not ends:
        return 0.0
    by_stage: dict[int, list[dict]] = {}
    for e in ends:
        by_stage.setdefault(e["Stage ID"], []).append(e["Task Info"])
    widest = max(by_stage.values(), key=len)
    extra = []
    for executor in {t["Executor ID"] for t in widest}:
        tasks = sorted((t for t in widest if t["Executor ID"] == executor), key=lambda t: t["Launch Time"])
        durations = [(t["Finish Time"] - t["Launch Time"]) / 1000 for t in tasks]
        if len(durations) > 1:
            extra.append(durations[0] - statistics.median(durations[1:]))
    return statistics.median(extra) if extra else 0.0
