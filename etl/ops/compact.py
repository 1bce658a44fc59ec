"""`etl compact`: merge small files of finished Hive partitions, under the job lock
(etl.compaction.run). Prints what it did, or with --dry-run what it would do, and changes
nothing then: neither a file, nor ZooKeeper's state, nor the metastore."""
from __future__ import annotations

import json

from etl.config import Config
from etl.errors import EXIT_OK
from etl.job.assemble import assemble_job, writer_spec
from etl.compaction.run import compact
from etl.source.kafka import KafkaMetadata
from etl.state.store import ZkStateStore


def run_compact(config: Config, only: list[str] | None, dry_run: bool, as_json: bool, out=print) -> int:
    spec = writer_spec(config)
    with ZkStateStore(config.zookeeper, config.job.name, config.retry) as store:
        holder = store.acquire_lock()
        if holder is not None:
            out(f"etl: job {config.job.name} is running: {holder.describe()}. Nothing was compacted; run again "
                f"when it is done (or set [compaction] after_run = true to compact at the end of every run).")
            return EXIT_OK
        kafka = KafkaMetadata(config.kafka, config.retry, config.job.name)  # a Job needs it; compaction reads none
        try:
            report = compact(assemble_job(config, store, kafka, spec), only, dry_run)
        finally:
            kafka.close()
            store.release_lock()
    out(json.dumps(report.to_json(), indent=2) if as_json else report.render())
    return EXIT_OK
