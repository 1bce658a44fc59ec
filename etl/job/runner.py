"""One `etl run`: take the lock, build what the job needs once, run batches, release.

The Kafka clients are built here, once: the metadata client, and the mirror of the committed
offsets to the job's consumer group (etl.source.group_mirror), which the store calls after each
commit. A run first mirrors every committed offset of the topics it reads, which corrects a
mirror that failed before and keeps a quiet partition's offset from expiring in the group; a
`--loop` run does so again, when caught up, every MIRROR_REFRESH_SECONDS."""
from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import asdict
from typing import Callable

from etl.compaction.run import compact
from etl.config import Config
from etl.errors import EXIT_OK, LockHeld
from etl.job.assemble import assemble_job, writer_spec
from etl.job.driver import Job
from etl.job.observer import NO_OBSERVER, JobObserver, Phase, timed
from etl.job.pending_reset import finish_pending_reset
from etl.rows.decoders.startup import check_writer_schemas
from etl.sink.fs import filesystem_for
from etl.source.group_mirror import OffsetMirror
from etl.source.kafka import KafkaMetadata
from etl.state.store import ZkStateStore

log = logging.getLogger(__name__)


# Receives what `etl run` reports (a committed batch, a compaction) as a JSON object: --json.
Emit = Callable[[dict], None]
# Kafka expires a group's offset not committed for offsets.retention.minutes (7 days by default).
MIRROR_REFRESH_SECONDS = 3600.0


def run_job(config: Config, loop: bool = False, interval: float = 60.0, max_batches: int | None = None,
            observer: JobObserver = NO_OBSERVER, emit: Emit | None = None) -> int:
    """Raises LockHeld, having done nothing, when another run holds the job's lock."""
    spec = writer_spec(config)  # a schema error stops the run before it touches anything
    _check_producers_schemas(config, spec)  # so does a column that cannot hold its field
    with contextlib.closing(OffsetMirror(config.kafka, on_failure=observer.consumer_group_commit_failed)) as mirror, \
            ZkStateStore(config.zookeeper, config.job.name, config.retry, offsets_moved=mirror.commit) as store:
        with timed(observer, Phase.SETUP):
            holder = store.take_lock()
        if holder is not None:
            observer.lock_held()
            raise LockHeld(f"job {config.job.name} is already running: {holder.describe()}. Exiting without "
                           f"changes. If that run died, its lock disappears when its ZooKeeper session expires "
                           f"(at most {config.zookeeper.session_timeout_seconds:g}s after it died); then run again.")
        try:
            _run_locked(config, store, mirror, spec, loop, interval, max_batches, observer, emit)
        finally:
            with timed(observer, Phase.CLEANUP):
                store.release_lock()
    return EXIT_OK


def _check_producers_schemas(config: Config, spec) -> None:
    """Avro and Protobuf: each column against its field in the writer schema producers use now
    (etl.rows.decoders.startup). With topics_regex, the topics are the ones it matches now."""
    if not config.job.decoder.reads_writer_schemas:
        return
    topics = config.kafka.topics
    if config.kafka.topics_regex is not None:
        kafka = KafkaMetadata(config.kafka, config.retry, config.job.name)
        try:
            topics = kafka.job_topics().loaded
        finally:
            kafka.close()
    check_writer_schemas(spec.decoder, topics, f"{config.path}: [hive] schema {config.hive.schema_file}")


def _run_locked(config, store, mirror, spec, loop, interval, max_batches, observer, emit) -> None:
    finish_pending_reset(store, filesystem_for(config.warehouse), log.warning)  # a reset that died half-way
    with timed(observer, Phase.SETUP):
        kafka = KafkaMetadata(config.kafka, config.retry, config.job.name)
    try:
        with timed(observer, Phase.SETUP):
            topics = kafka.job_topics().loaded
            kafka.partitions(topics)  # a missing topic fails before Spark starts
            mirror_committed(store, mirror, topics)
        job = assemble_job(config, store, kafka, spec, observer)
        refresh = _MirrorRefresh(lambda: mirror_committed(store, mirror, kafka.job_topics().loaded))
        try:
            job.compactor().finish_pending()  # before any batch: a batch writes where Hive reads
            _run_batches(job, loop, interval, max_batches, config.compaction.after_run, emit, observer, refresh)
        except Exception:
            job.spark.settle_after_failure()  # Spark's running tasks end before the JVM does
            raise
    finally:
        kafka.close()


def mirror_committed(store: ZkStateStore, mirror: OffsetMirror, topics: tuple[str, ...]) -> None:
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


def _run_batches(job: Job, loop: bool, interval: float, max_batches: int | None, compact_after: bool,
                 emit: Emit | None, observer: JobObserver = NO_OBSERVER,
                 refresh_mirror: Callable[[], None] = lambda: None) -> None:
    done = 0
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
        if caught_up and compact_after:
            _compact(job, emit)
        if caught_up and not loop:
            return
        if caught_up:
            refresh_mirror()
            time.sleep(interval)
    if compact_after:
        _compact(job, emit)


def _compact(job: Job, emit: Emit | None) -> None:
    """[compaction] after_run: the batches are committed, so none is open."""
    report = compact(job)
    if report.planned or report.waiting:
        log.info("compaction: %s", report.render())
        _say(emit, report.render(), {"event": "compaction", **report.to_json()})


def _say(emit: Emit | None, text: str, record: dict) -> None:
    """A line for people on stdout, or with --json the same as one JSON object."""
    if emit is None:
        print(f"etl: {text}")
    else:
        emit(record)
