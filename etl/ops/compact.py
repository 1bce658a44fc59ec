"""`etl compact`: merge small files of finished Hive partitions, under the job lock
(etl.compaction.run). Prints what it did, or with --dry-run what it would do, and changes
nothing then: neither a file, nor ZooKeeper's state, nor the metastore.

A compaction reads no Kafka and writes no batch: the command builds no Kafka client and no
writer spec: its context is a CommandContext (etl.context.command), which has neither, and gives
only what etl.compaction.run.CompactionHost asks for."""
from __future__ import annotations

import json

from etl.compaction.run import compact
from etl.config import Config
from etl.context.command import CommandContext
from etl.errors import EXIT_OK


def run_compact(config: Config, only: list[str] | None, dry_run: bool, as_json: bool, out=print) -> int:
    with CommandContext(config) as context:
        return compact_in(context, only, dry_run, as_json, out)


def compact_in(context: CommandContext, only: list[str] | None, dry_run: bool, as_json: bool, out=print) -> int:
    context.partitioner  # the DDL is read before anything is touched, as `etl run` does
    store = context.store
    holder = store.acquire_lock()
    if holder is not None:
        out(f"etl: job {context.config.job.name} is running: {holder.describe()}. Nothing was compacted; run again "
            f"when it is done (or set [compaction] after_run = true to compact at the end of every run).")
        return EXIT_OK
    try:
        report = compact(context, only, dry_run)
    finally:
        store.release_lock()
    out(json.dumps(report.to_json(), indent=2) if as_json else report.render())
    return EXIT_OK
