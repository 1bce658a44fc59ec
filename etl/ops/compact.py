"""`etl compact`: merge small files of finished Hive partitions, under the job lock
(etl.compaction.run). Prints what it would do, and changes nothing: neither a file, nor
ZooKeeper's state, nor the metastore; with --execute it does it and prints what it did
(etl.ops.acting).

A compaction reads no Kafka and writes no batch: the command builds no Kafka client and no
writer spec: its context is a CommandContext (etl.context.command), which has neither, and gives
only what etl.compaction.run.CompactionHost asks for.

Which tables: a one-table job's table and its rejected table; a job with routes, each table its
committed topics were loaded into (as routed now, and by the routes `etl bind` retired: the
tables `etl verify` checks), then its rejected table once, which every route shares. `--table` keeps
those it names (Hive names, in any case). Compactions under way are carried on first, whatever
their table."""
from __future__ import annotations

import json
from dataclasses import dataclass

from etl.compaction.run import compact
from etl.compaction.tables import CompactedTable
from etl.config import Config
from etl.context.command import CommandContext
from etl.errors import EXIT_OK, ConfigError
from etl.model.shape import shape_of
from etl.model.compaction import TableKind
from etl.ops.acting import PREVIEW_LAST_LINE, Act
from etl.sink.warehouse import Warehouse
from etl.state.protocols import StateStore


@dataclass(frozen=True)
class CompactOptions:
    """`etl compact`'s command line: the partitions to compact whether finished or not
    (--partition), the tables to look at (--table; None: all the job's), whether it acts, and
    whether its report is JSON."""
    partitions: tuple[str, ...] | None = None
    tables: tuple[str, ...] | None = None
    act: Act = Act.PREVIEW
    as_json: bool = False


def run_compact(config: Config, options: CompactOptions, out=print) -> int:
    with CommandContext(config) as context:
        return compact_in(context, options, out)


def compaction_tables(config: Config, store: StateStore, warehouse: Warehouse,
                      names: tuple[str, ...] | None) -> tuple[CompactedTable, ...]:
    """The tables to look at, the rejected one last; `names` (--table) keeps those named. An unknown
    name is refused (ConfigError, exit 2) before anything is touched, naming the job's tables."""
    rejected = {config.hive.rejected_table.lower(): CompactedTable(TableKind.REJECTED)}
    shape = shape_of(config)
    loaded = shape.held_tables(warehouse, lambda: {topic for topic, _ in store.offsets.committed_offsets()}, None,
                               store.operator.binding)
    found = {name.lower(): CompactedTable(TableKind.MAIN, shape.plan_name(name)) for name, _ in loaded} | rejected
    if names is None:
        return tuple(found.values())
    unknown = sorted({name for name in names if name.lower() not in found})
    if unknown:
        raise ConfigError(f"--table {', '.join(unknown)}: not a table of job {config.job.name}, whose tables are "
                          f"{', '.join(found)}; nothing was touched")
    return tuple(table for name, table in found.items() if name in {n.lower() for n in names})


def compact_in(context: CommandContext, options: CompactOptions, out=print) -> int:
    context.partitioner  # the DDL is read before anything is touched, as `etl run` does
    store = context.store
    chosen = compaction_tables(context.config, store, context.warehouse, options.tables)
    holder = store.session.acquire_lock()
    if holder is not None:
        out(f"etl: job {context.config.job.name} is running: {holder.describe()}. Nothing was compacted; run again "
            f"when it is done (or set [compaction] after_run = true to compact at the end of every run).")
        return EXIT_OK
    try:
        only = None if options.partitions is None else list(options.partitions)
        report = compact(context, only, not options.act.executes, tables=chosen)
    finally:
        store.session.release_lock()
    out(json.dumps(report.to_json(), indent=2) if options.as_json else report.render())
    if report.planned and not options.act.executes and not options.as_json:
        out(PREVIEW_LAST_LINE)
    return EXIT_OK
