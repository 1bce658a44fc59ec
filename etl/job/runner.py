"""One `etl run`: take the lock, build what the job needs once, run batches, release."""
from __future__ import annotations

import logging
import time

from etl.config import Config
from etl.rows.decoders import make_decoder
from etl.rows.dimensions import DimensionLoader
from etl.job.driver import Job
from etl.rows.enrichment import check_against_schema, enriched_columns
from etl.errors import EXIT_OK
from etl.sink.fs import filesystem_for
from etl.source.kafka import KafkaMetadata
from etl.rows.pipeline import WriterSpec
from etl.ops.reset import finish_pending_reset
from etl.model.schema import load_table_schema
from etl.rows.transform import load_transform
from etl.state.store import ZkStateStore

log = logging.getLogger(__name__)


def writer_spec(config: Config) -> WriterSpec:
    """Everything the tasks need to write, checked at start-up: the DDL, the decoder, the
    dimensions against the DDL (and file sources' columns), the transform importable."""
    schema = load_table_schema(config.hive.schema_file, config.job.key_column)
    check_against_schema(config.dimensions, schema, config.path, config.hive.schema_file)
    loader = DimensionLoader(config.dimensions, schema, spark=lambda: None)
    for dimension in config.dimensions:
        loader.check_source(dimension)
    if config.job.transform:
        load_transform(config.job.transform)
    # Enriched columns are the dimensions' to fill: the decoder neither reads nor checks them.
    decoder = make_decoder(config.job.decoder, schema.without_columns(enriched_columns(config.dimensions)))
    return WriterSpec(schema=schema, decoder=decoder, key_column=config.job.key_column,
                      row_group_size=config.job.row_group_size, compression=config.job.compression,
                      dimensions=config.dimensions, transform=config.job.transform)


def run_job(config: Config, loop: bool = False, interval: float = 60.0, max_batches: int | None = None) -> int:
    spec = writer_spec(config)  # a schema error stops the run before it touches anything
    with ZkStateStore(config.zookeeper, config.job.name, config.retry) as store:
        holder = store.acquire_lock()
        if holder is not None:
            print(f"etl: job {config.job.name} is already running: {holder.describe()}. Exiting without "
                  f"changes. If that run died, its lock disappears when its ZooKeeper session expires "
                  f"(at most {config.zookeeper.session_timeout_seconds:g}s after it died); then run again.")
            return EXIT_OK
        try:
            _run_locked(config, store, spec, loop, interval, max_batches)
        finally:
            store.release_lock()
    return EXIT_OK


def _run_locked(config, store, spec, loop, interval, max_batches) -> None:
    finish_pending_reset(store, filesystem_for(config.warehouse), log.warning)  # a reset that died half-way
    kafka = KafkaMetadata(config.kafka, config.retry, config.job.name)
    try:
        kafka.partitions(config.kafka.topics)  # a missing topic fails before Spark starts
        from etl.hive.spark import build_spark
        job = Job(config, store, kafka, spec, lambda: build_spark(config))
        _run_batches(job, loop, interval, max_batches)
    finally:
        kafka.close()


def _run_batches(job: Job, loop: bool, interval: float, max_batches: int | None) -> None:
    done = 0
    while max_batches is None or done < max_batches:
        summary = job.run_once()
        if summary is not None:
            done += 1
            log.info(summary.describe())
            print(f"etl: {summary.describe()}")
        caught_up = summary is None or not (summary.resumed or summary.reached_cap)
        if caught_up and not loop:
            return
        if caught_up:
            time.sleep(interval)
