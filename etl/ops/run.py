"""`etl run`: take the lock, run batches, release. A command: everything it uses is built once by
its context (etl.context.job.JobContext), the Job, the batch state machine, included.

The store mirrors the committed offsets to the job's consumer group (etl.source.group_mirror)
after each commit. A run first mirrors every committed offset of the topics it reads, which corrects a
mirror that failed before and keeps a quiet partition's offset from expiring in the group; a
`--loop` run does so again, when caught up, every MIRROR_REFRESH_SECONDS."""
from __future__ import annotations

import datetime as dt
import logging
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Callable

from etl.compaction.run import compact, compactor_of
from etl.config import Config
from etl.context.job import JobContext
from etl.errors import EXIT_OK, LockHeld
from etl.job.driver import Job
from etl.job.observer import NO_OBSERVER, JobObserver, Phase, PhaseTimeline, timed
from etl.job.pending_reset import finish_pending_reset
from etl.model.batch import utc_now
from etl.ops.compact import compaction_tables
from etl.rows.decoders.startup import check_writer_schemas
from etl.source.group_mirror import OffsetMirror
from etl.state.protocols import OffsetPart

if TYPE_CHECKING:
    from etl.hive.spark import EarlyLaunch

log = logging.getLogger(__name__)


# Receives what `etl run` reports (a committed batch, a compaction) as a JSON object: --json.
Emit = Callable[[dict], None]
# Kafka expires a group's offset not committed for offsets.retention.minutes (7 days by default).
MIRROR_REFRESH_SECONDS = 3600.0


@dataclass(frozen=True)
class RunOptions:
    """`etl run`'s command line: keep going (--loop, sleeping `interval` seconds when caught up),
    and stop after `max_batches` committed batches (None: when caught up; with `loop`, never)."""
    loop: bool = False
    interval: float = 60.0
    max_batches: int | None = None


def run_job(config: Config, options: RunOptions = RunOptions(), observer: JobObserver = NO_OBSERVER,
            emit: Emit | None = None,
            clock: Callable[[], dt.datetime] = utc_now, early: EarlyLaunch | None = None) -> int:
    """Raises LockHeld, having done nothing, when another run holds the job's lock. `clock`: the
    run's one clock, which plans batches, closes markers' windows and finishes compactions. With
    `emit`, a run that ends well emits its phases last (PhaseTimeline.report). `early`: the
    driver JVM the command launched before it imported this (etl.hive.spark.launch_early)."""
    timeline = PhaseTimeline(observer)
    with JobContext(config, clock, moves_offsets=True, runs_batches=True, observer=timeline, early=early) as context:
        code = run_in(context, options, emit)
    if emit is not None:
        emit(timeline.report())
    return code


def run_in(context: JobContext, options: RunOptions = RunOptions(), emit: Emit | None = None) -> int:
    config, observer = context.config, context.observer
    context.spec  # a schema error stops the run before it touches anything
    _check_producers_schemas(context)  # so does a column that cannot hold its field
    store = context.store
    with timed(observer, Phase.SETUP):
        holder = store.session.take_lock()
    if holder is not None:
        observer.lock_held()
        raise LockHeld(f"job {config.job.name} is already running: {holder.describe()}. Exiting without "
                       f"changes. If that run died, its lock disappears when its ZooKeeper session expires "
                       f"(at most {config.zookeeper.session_timeout_seconds:g}s after it died); then run again.")
    try:
        _run_locked(context, options, emit)
    finally:
        with timed(observer, Phase.CLEANUP):
            store.session.release_lock()
    return EXIT_OK


def _check_producers_schemas(context: JobContext) -> None:
    """Avro and Protobuf: each column against its field in the writer schema producers use now
    (etl.rows.decoders.startup), route by route; a registry route's tables are derived from those
    schemas instead (etl.job.registry_tables). With topics_regex, the topics are the ones it
    matches now."""
    config = context.config
    for route in config.routes.routes:
        if not route.decoder.reads_writer_schemas:
            continue
        topics = route.topics if route.topics_regex is None else \
            [topic for topic in context.kafka.job_topics().loaded if route.chooses(topic)]
        if route.from_registry:  # its tables are derived from these schemas: each derived now, once
            for topic in topics:
                context.spec_for(route, topic)
            continue
        where = route.key_where("schema")
        check_writer_schemas(context.spec_for(route).decoder, topics, f"{config.path}: {where} {route.schema_file}")


def _run_locked(context: JobContext, options: RunOptions, emit: Emit | None) -> None:
    store, observer = context.store, context.observer
    finish_pending_reset(store.operator, context.fs, log.warning)  # a reset that died half-way
    with timed(observer, Phase.SETUP):
        kafka = context.kafka
        topics = kafka.job_topics().loaded
        group_usable = context.mirror.access_check(kafka.admin, topics)
        kafka.partitions(topics)  # a missing topic fails before Spark starts
        mirror_committed(store.offsets, context.mirror, topics)
        group_usable()  # a group the job may not use, too
    job = context.job()
    refresh = _MirrorRefresh(lambda: mirror_committed(store.offsets, context.mirror, kafka.job_topics().loaded))
    try:
        compactor_of(context).finish_pending()  # before any batch: a batch writes where Hive reads
        _run_batches(job, options, emit, observer, refresh,
                     compact=(lambda: _compact(context, emit)) if context.config.compaction.after_run else None)
    except Exception:
        context.spark.settle_after_failure()  # Spark's running tasks end before the JVM does
        raise


def mirror_committed(store: OffsetPart, mirror: OffsetMirror, topics: tuple[str, ...]) -> None:
    """Mirror the committed offset of every partition of `topics` (the ones the job reads now:
    with topics_regex, a topic it no longer matches keeps its last mirrored offsets until Kafka
    expires them)."""
    reading = set(topics)
    mirror.commit({tp: found.value for tp, found in store.committed_offsets().items() if tp[0] in reading})


class _MirrorRefresh:
    """`refresh`, called when due: at most once every MIRROR_REFRESH_SECONDS."""

    def __init__(self, refresh: Callable[[], None]):
        self.refresh, self.last = refresh, time.monotonic()

    def __call__(self) -> None:
        if time.monotonic() - self.last >= MIRROR_REFRESH_SECONDS:
            self.refresh()
            self.last = time.monotonic()


def _run_batches(job: Job, options: RunOptions, emit: Emit | None,
                 observer: JobObserver = NO_OBSERVER, refresh_mirror: Callable[[], None] = lambda: None,
                 compact: Callable[[], None] | None = None) -> None:
    """`compact`: [compaction] after_run's step, when caught up and at the end (None: off)."""
    done, max_batches = 0, options.max_batches
    while max_batches is None or done < max_batches:
        summary = job.run_once()
        if summary is not None:
            done += 1
            observer.batch_committed(summary, job.committed)
            log.info(summary.describe())
            _say(emit, summary.describe(), {"event": "committed", **asdict(summary)})
        elif emit is not None and done == 0:
            emit({"event": "nothing_to_do", "job": job.config.job.name})
        caught_up = summary is None or not (summary.resumed or summary.reached_cap)
        if caught_up and compact is not None:
            compact()
        if caught_up and not options.loop:
            return
        if caught_up:
            refresh_mirror()
            time.sleep(options.interval)
    if compact is not None:
        compact()


def _compact(context: JobContext, emit: Emit | None) -> None:
    """[compaction] after_run: the batches are committed, so none is open. Every table, as
    `etl compact` without --table."""
    report = compact(context, tables=compaction_tables(context.config, context.store, context.warehouse, None))
    if report.planned or report.waiting:
        log.info("compaction: %s", report.render())
        _say(emit, report.render(), {"event": "compaction", **report.to_json()})


def _say(emit: Emit | None, text: str, record: dict) -> None:
    """A line for people on stdout, or with --json the same as one JSON object."""
    if emit is None:
        print(f"etl: {text}")
    else:
        emit(record)
