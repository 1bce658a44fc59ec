"""`etl rollup rebuild --rollup NAME`: a rollup's partials built anew from the rows its table holds.

For a rollup added to a table that already holds rows, or whose definition changed: both are
refused by `etl run` (etl.hive.registrar.HiveRegistrar.ensure_rollup), since partials of some
rows only, or of two definitions, would not add up. Under the job's lock, with no batch open:
  1. the partials in place, if any, are moved out (kept under `_etl_moved_aside`, as a reset
     keeps files), and the view and the partials table are dropped from the metastore (both
     external: the metastore deletes no file);
  2. each committed file of the table gets its partial, computed from it as a batch's task
     computes it (etl.ops.rollup_files, etl.job.rollup_task), named by it: a merged file's (etl
     compact) is one partial of all its ranges, as a compaction folds them, in the partials
     partition's folder now (which a compaction moved with its data);
  3. the partials table is created with the definition it was built by, its partitions added,
     and the view created;
  4. with a PostgreSQL target, its rows are replaced by those partials merged, and its offsets
     there by ZooKeeper's, in one transaction (etl.ops.rollup_postgres).
From step 1 to step 3 the view is gone: a query of it fails until the rebuild ends. A rebuild
that dies is done again by running it again: step 1 moves out what it had written. Previews by
default; --execute acts.
"""
from __future__ import annotations

import getpass
import posixpath
from dataclasses import dataclass

from etl.config import Config
from etl.config.rollups import rollup_route
from etl.context.job import JobContext
from etl.errors import EXIT_OK, RefusedUntilDone
from etl.job.rollup_task import publish_partials
from etl.model.batch import utc_now_iso
from etl.model.events import MovedAside
from etl.model.naming import name_stem, partition_values
from etl.model.rollup_table import RollupSpec
from etl.ops.acting import Act, stops_at_preview
from etl.ops.job_tables import held_by_job
from etl.ops.rollup_files import file_rows
from etl.ops.rollup_postgres import rebuild_in_postgres, rollup_named
from etl.sink.aside import aside_path, aside_root, move_aside


@dataclass(frozen=True)
class RebuildOptions:
    rollup: str  # its section's name
    act: Act = Act.PREVIEW


def rebuild_rollup(config: Config, options: RebuildOptions, out=print) -> int:
    with JobContext(config) as context:
        spec, table = rollup_named(context, options.rollup)
        store = context.store
        holder = store.session.acquire_lock()
        if holder is not None:
            raise RefusedUntilDone(f"a run holds the job lock ({holder.describe()}); try again when it has finished")
        try:
            opened = store.batches.open_batch()
            if opened:
                raise RefusedUntilDone(f"batch {opened[0].batch_id} is open ({opened[0].state.value}); run "
                                       f"`etl recover --execute` first")
            return _rebuild(context, spec, table, options.act, out)
        finally:
            store.session.release_lock()


def _rebuild(context: JobContext, spec: RollupSpec, table: str, act: Act, out) -> int:
    fs, warehouse = context.fs, context.located()
    files = held_by_job(fs, context.config, context.store, warehouse).by_table.get(table)
    ranges = files.files if files is not None else []
    old = list(fs.walk_files(warehouse.partials_root(spec.partials_table)))
    count = len({file.path for file in ranges})
    out(f"{spec.rollup.describe()}: {len(old)} partials in place move out of {spec.partials_table}; "
        f"{count} committed files of {table} get their partials anew; {spec.view} and "
        f"{spec.partials_table} are made again")
    if spec.rollup.target is not None:
        out(f"then its rows in {spec.rollup.target.describe()} are replaced by those partials merged, and its "
            f"offsets there become ZooKeeper's")
    if stops_at_preview(act, out):
        return EXIT_OK
    if old:
        at = utc_now_iso()
        moves = [(path, aside_path(warehouse.fs_root, aside_root(warehouse.fs_root, context.config.job.name, at),
                                   path)) for path in old]
        move_aside(fs, moves)
        context.store.operator.record_event(MovedAside(at, getpass.getuser(), "etl rollup rebuild", tuple(moves)))
    registrar = context.registrar()
    registrar.warehouse = warehouse  # its partitions are registered where compactions moved them, as a batch's are
    registrar.drop_rollup(spec)
    layout = context.spec_for(rollup_route(spec.rollup, context.config.routes)).layout
    for file, rows in file_rows(fs, spec, ranges):
        folder = warehouse.partials_dir(spec.partials_table, file.partition_path)
        fs.makedirs(folder)
        publish_partials(fs, (spec,), (folder,), file.path, layout, name_stem(posixpath.basename(file.path)),
                         file.range.partition, rows=rows)
    registrar.ensure_rollup(spec, loaded=False)
    partitions = sorted({file.partition_path for file in ranges})
    registrar.add_rollup_partitions(spec, [partition_values(path) for path in partitions])
    out(f"done: {count} partials in {len(partitions)} partitions; {spec.view} made again")
    if spec.rollup.name in context.rollup_databases:  # and PostgreSQL's rows, from those partials
        out(rebuild_in_postgres(context, spec, ranges))
    return EXIT_OK
