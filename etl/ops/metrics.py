"""Prometheus metrics of one `etl run`, published when it ends ([metrics], etl.config.metrics).

A batch job is gone before Prometheus could scrape it, so the run's metrics go to a
Pushgateway or to node_exporter's textfile collector (etl.ops.metrics_publish). They are
collected into a private CollectorRegistry per run (no process-wide state) from four places:
  - the run itself, through the JobObserver hooks: seconds per phase, and each committed
    batch's rows, rejected and late rows, files and their bytes (measured before its commit,
    so that the commit adds them to the load totals);
  - ZooKeeper and Kafka, read once when the run ends, the way `etl status` reads them: each
    partition's committed offset and lag, and the age of the open batch (a failed run leaves
    one behind);
  - the load totals the commits keep in ZooKeeper (etl.state.totals), exported as counters;
  - the outcome: the time of the last success, failure or lock-held exit.
Every metric names the ETL job in the label `etl_job` (etl.ops.metrics_publish says why not
`job`); a batch's counts name their table in `table`, one series per table for a job with
[route] sections (etl.ops.metrics_tables). A metric that could not be collected is left out
(and logged), never guessed.
Publishing never changes the run's exit code (etl.ops.metrics_publish). docs/monitoring.md
lists them, with the names they had before.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import logging
import time
from dataclasses import replace
from typing import Iterator

from importlib import metadata

from prometheus_client import CollectorRegistry, Gauge
from prometheus_client.core import CounterMetricFamily

from etl.config import Config
from etl.context.job import JobContext
from etl.errors import EXIT_OK, EXIT_USAGE, EtlError
from etl.job.observer import NO_OBSERVER, JobObserver, Phase
from etl.job.summary import BatchSummary
from etl.model.batch import Batch
from etl.model.binding import BindingMismatch
from etl.ops.metrics_publish import JOB_LABEL, publish
from etl.ops.metrics_tables import FileCounts, counted, merged, written_files
from etl.ops.status import read_job_lag
from etl.sink.warehouse import Warehouse
from etl.state.store import ZooKeeperUnavailable
from etl.state.totals import LoadTotals

log = logging.getLogger(__name__)

SUCCESS, FAILURE, LOCK_HELD = "success", "failure", "lock_held"
# The load totals (etl.state.totals) as counters: name (exported with `_total`), help, field.
COUNTERS = {
    "etl_batches": ("LOAD batches committed since the job's first commit", "batches"),
    "etl_offsets": ("Kafka offsets those batches covered", "offsets"),
    "etl_rows": ("Rows those batches wrote to the table", "rows"),
    "etl_rejected_rows": ("Records those batches could not decode (into the rejected table)", "rejected"),
    "etl_late_rows": ("Rows written into partitions already due their _SUCCESS (event time)", "late"),
    "etl_written_bytes": ("Bytes of those batches' data files, since the first run that measured them", "bytes"),
}


class RunMetrics(JobObserver):
    """What the run reports through the JobObserver hooks, kept until it is published."""

    def __init__(self, config: Config):
        """Its own context: what it reads, it reads once, with one attempt each (the run has already
        waited out its retries on whatever is down, the metrics do not wait again)."""
        self.config = config
        self.context = JobContext(config, retry=replace(config.retry, attempts=1))
        self.started = time.monotonic()
        self.phases = {phase: 0.0 for phase in Phase}
        self.summaries: list[BatchSummary] = []
        self.batches: list[Batch] = []
        self.found_lock_held = False
        self.mirror_failures = 0  # commits to the Kafka consumer group that failed (etl.source.group_mirror)
        self.measured: dict[int, FileCounts] = {}  # batch id -> table -> (files, bytes), listed before its commit
        # Topics with committed offsets that the routes cannot load: read with the lag, or said by the
        # run's refusal of them (which reads no state after it); None: not known.
        self.unloadable: int | None = None

    def phase_done(self, phase: Phase, seconds: float) -> None:
        self.phases[phase] += seconds

    def batch_committed(self, summary: BatchSummary, batch: Batch) -> None:
        self.summaries.append(summary)
        self.batches.append(batch)

    def lock_held(self) -> None:
        self.found_lock_held = True

    def consumer_group_commit_failed(self) -> None:
        self.mirror_failures += 1

    def written_bytes(self, batch: Batch, warehouse: Warehouse) -> int | None:
        """Listed once, before the commit (which adds them to the load totals), and kept for the
        run's own gauges. A listing that fails costs the bytes of this batch, never the commit."""
        try:
            self.measured[batch.batch_id] = written_files(self.context.fs, self.config, warehouse, [batch])
        except Exception as exc:  # noqa: BLE001 - a metrics bug must not stop a commit
            log.warning("metrics: the sizes of batch %d's files not read, so not counted: %s: %s", batch.batch_id,
                        type(exc).__name__, exc)
            return None
        return sum(size for _, size in self.measured[batch.batch_id].values())


@contextlib.contextmanager
def published_metrics(config: Config) -> Iterator[JobObserver]:
    """The observer for run_job; on the way out, however the run ends, its metrics are
    published. Without [metrics] there is nothing to publish and the observer is the no-op one."""
    if not config.metrics.enabled:
        yield NO_OBSERVER
        return
    metrics = RunMetrics(config)
    with metrics.context:
        try:
            yield metrics
        except BaseException as exc:  # also Ctrl-C: a run that stopped half-way is the one to see
            outcome = LOCK_HELD if metrics.found_lock_held else FAILURE
            code = exc.exit_code if isinstance(exc, EtlError) else 1
            if isinstance(exc, BindingMismatch) and exc.not_loadable:
                metrics.unloadable = len(exc.not_loadable)
            # Not read again: ZooKeeper that just failed the run, nor anything after a config error
            # found at run time, which exits 2 having touched nothing.
            _publish_quietly(metrics, outcome, code, not isinstance(exc, ZooKeeperUnavailable) and code != EXIT_USAGE)
            raise
        _publish_quietly(metrics, LOCK_HELD if metrics.found_lock_held else SUCCESS, EXIT_OK)


def _publish_quietly(metrics: RunMetrics, outcome: str, exit_code: int, read_state: bool = True) -> None:
    """Publishing is best effort: whatever goes wrong is one WARNING, never the run's failure."""
    try:
        registry = build_registry(metrics, outcome, exit_code, read_state)
        publish(metrics.config.metrics, metrics.config.job.name, registry)
    except Exception as exc:  # noqa: BLE001 - a metrics bug must not turn a committed batch into a failure
        log.warning("metrics not published: %s: %s", type(exc).__name__, exc)


def build_registry(metrics: RunMetrics, outcome: str, exit_code: int, read_state: bool = True) -> CollectorRegistry:
    """A lock-held run reports only that: the run holding the lock publishes the rest.
    `read_state`: also read offsets, lag and the open batch from ZooKeeper and Kafka."""
    registry = CollectorRegistry(auto_describe=True)
    job = metrics.config.job.name
    now = time.time()
    _gauge(registry, "etl_build_info", "The ETL's version, in the label version (value 1)", job=job,
           version=etl_version()).set(1)
    if outcome == LOCK_HELD:
        _gauge(registry, "etl_last_lock_held_timestamp_seconds",
               "When a run last exited because another run held the job's lock (changes() counts them)",
               job=job).set(now)
        return registry
    stamp = "etl_last_success_timestamp_seconds" if outcome == SUCCESS else "etl_last_failure_timestamp_seconds"
    _gauge(registry, stamp, f"When a run last ended in {outcome}", job=job).set(now)
    _gauge(registry, "etl_last_run_exit_code", "The last run's exit code (0 success, 1 needs an operator, "
                                               "75 a retry will help)", job=job).set(exit_code)
    _gauge(registry, "etl_run_duration_seconds", "Wall time of the last run", job=job).set(
        time.monotonic() - metrics.started)
    _run_metrics(registry, metrics, job)
    if read_state:
        _state_metrics(registry, metrics, job)
    if metrics.unloadable is not None:
        _gauge(registry, "etl_unloadable_topics", "Topics with committed offsets that the routes can no longer load "
               "(two routes choose one, a templated name clashes): every run refuses them", job=job).set(
            metrics.unloadable)
    return registry


def etl_version() -> str:
    """The installed distribution's version; etl.__version__ from a source tree not installed."""
    try:
        return metadata.version("kafka-hive-etl")
    except metadata.PackageNotFoundError:
        import etl
        return etl.__version__


def _gauge(registry: CollectorRegistry, name: str, documentation: str, job: str, **labels: str):
    """A gauge of the last run, set once, with etl_job=<job> and these labels (a push replaces
    the previous value: what accumulates across runs comes from ZooKeeper, totals_metrics)."""
    labels = {JOB_LABEL: job, **labels}
    return Gauge(name, documentation, list(labels), registry=registry).labels(**labels)


def totals_metrics(registry: CollectorRegistry, totals: LoadTotals, job: str) -> None:
    """The load totals as counters `<name>_total` (no `_created` series: their start is the
    job's first commit, `since`). Bytes never measured are left out, not reported as 0."""
    families = []
    for name, (documentation, field) in COUNTERS.items():
        if field == "bytes" and not totals.bytes_since:
            continue
        family = CounterMetricFamily(name, documentation, labels=[JOB_LABEL])
        family.add_metric([job], getattr(totals, field))
        families.append(family)
    registry.register(_Families(families))


class _Families:
    """A collector of fixed metric families (CollectorRegistry takes collectors)."""

    def __init__(self, families: list):
        self.families = families

    def collect(self):
        return self.families


def _run_metrics(registry: CollectorRegistry, metrics: RunMetrics, job: str) -> None:
    seconds = Gauge("etl_run_phase_seconds", "Seconds the last run spent in each phase, over all its batches",
                    [JOB_LABEL, "phase"], registry=registry)
    for phase, spent in metrics.phases.items():
        seconds.labels(job, phase.value).set(spent)
    done = metrics.summaries
    _gauge(registry, "etl_run_batches", "Batches the last run committed", job=job).set(len(done))
    _gauge(registry, "etl_run_consumer_group_commit_failures", "Commits of the offsets to the job's Kafka consumer "
           "group (a mirror of ZooKeeper's, for Kafka's tools) that failed in the last run",
           job=job).set(metrics.mirror_failures)
    for name, documentation, field in (
            ("etl_run_rows", "Rows the last run's batches wrote to the table", "rows"),
            ("etl_run_rejected_rows", "Records the last run's batches could not decode (into the rejected table)",
             "rejected"),
            ("etl_run_late_rows", "Rows written into partitions already due their _SUCCESS (event time)", "late_rows"),
            ("etl_run_offsets", "Kafka offsets the last run's batches covered", "records")):
        _by_table(registry, name, documentation, job, counted(metrics.config, field, done, metrics.batches))


def _by_table(registry: CollectorRegistry, name: str, documentation: str, job: str, values: dict) -> None:
    """A gauge with one series per table label (etl.ops.metrics_tables)."""
    gauge = Gauge(name, documentation, [JOB_LABEL, "table"], registry=registry)
    for table, value in values.items():
        gauge.labels(job, table).set(value)


def _state_metrics(registry: CollectorRegistry, metrics: RunMetrics, job: str) -> None:
    """From ZooKeeper, Kafka and the warehouse, once. One attempt each: the run has already
    waited out its retries on whatever is down, the metrics do not wait again."""
    context = metrics.context
    try:
        store = context.store
        committed = {tp: c.value for tp, c in store.offsets.committed_offsets().items()}
        opened = store.batches.open_batch()
        warehouse = context.located()
        totals, _ = store.totals.load_totals()
    except EtlError as exc:
        log.warning("metrics: ZooKeeper not read, so no offsets, lag, open batch age or totals: %s", exc)
        return
    age = 0.0 if opened is None else max(0.0, time.time() - _epoch(opened[0].planned_at))
    _gauge(registry, "etl_open_batch_age_seconds", "Seconds since the open batch was planned (0: none open)",
           job=job).set(age)
    totals_metrics(registry, totals, job)
    _files_metrics(registry, metrics, warehouse, job)
    _partition_metrics(registry, metrics, committed, job)


def _files_metrics(registry, metrics: RunMetrics, warehouse: Warehouse, job: str) -> None:
    """The batches' files as listed before their commits; a batch not listed then is listed now."""
    unlisted = [batch for batch in metrics.batches if batch.batch_id not in metrics.measured]
    try:
        listed = written_files(metrics.context.fs, metrics.config, warehouse, unlisted)
    except EtlError as exc:
        log.warning("metrics: the written files' sizes not read: %s", exc)
        return
    counts = merged(listed, *(metrics.measured[b.batch_id] for b in metrics.batches if b.batch_id in metrics.measured))
    _by_table(registry, "etl_run_written_files", "Data files the last run's batches published", job,
              {table: files for table, (files, _) in counts.items()})
    _by_table(registry, "etl_run_written_bytes", "Bytes of those files", job,
              {table: size for table, (_, size) in counts.items()})


def _partition_metrics(registry: CollectorRegistry, metrics: RunMetrics, committed: dict, job: str) -> None:
    """Lag as `etl status` computes it (etl.ops.status.read_job_lag): a partition never committed
    lags from its earliest offset, and a topic the routes can no longer load counts too."""
    context = metrics.context
    try:
        lags = read_job_lag(context.kafka, committed)
    except EtlError as exc:
        log.warning("metrics: Kafka not read, so no lag: %s", exc)
        return
    metrics.unloadable = len(lags.not_loadable)
    offset = Gauge("etl_committed_offset", "The next offset the job will read, as committed in ZooKeeper",
                   [JOB_LABEL, "topic", "partition"], registry=registry)
    lag = Gauge("etl_lag_records", "Records in Kafka not yet committed to the table (latest - committed)",
                [JOB_LABEL, "topic", "partition"], registry=registry)
    for status in lags.partitions:
        labels = {JOB_LABEL: job, "topic": status.topic, "partition": str(status.partition)}
        if status.committed is not None:
            offset.labels(**labels).set(status.committed)
        lag.labels(**labels).set(status.lag)


def _epoch(iso: str) -> float:
    stamp = dt.datetime.fromisoformat(iso)
    return (stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.timezone.utc)).timestamp()
