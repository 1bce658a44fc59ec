"""A rollup's PostgreSQL rows and offsets made again from the partials its Hive table holds: for
`etl rollup rebuild` (after it computed the partials anew), and for `etl reset-offsets
--rebuild-rollups` (after a reset moved offsets back under what the database holds, which it
cannot subtract: a minimum does not come apart). And `etl verify`'s look at the database: its
offsets none past ZooKeeper's, and (--deep) its rows the partials merged.

The partials of the table's committed ranges, merged, replace the database's rows, and its offsets
become ZooKeeper's committed offsets, in one transaction (etl.postgres.rollup_db). Under the job's
lock with no batch open, so the partials and the offsets say the same.
"""
from __future__ import annotations

import math

from etl.config.rollups import rollup_route
from etl.context.job import JobContext
from etl.errors import ConfigError, RollupRefused
from etl.job.rollup_mirror import ahead_of_zookeeper, merged_partials
from etl.model.batch import Batch
from etl.model.events import OffsetChange
from etl.model.rollup_table import RollupSpec
from etl.ops.job_tables import held_by_job
from etl.ops.coverage import Problem
from etl.ops.inventory import WarehouseFile
from etl.ops.rollup_files import REBUILD_ACTION, partial_path
from etl.postgres.positions import Partition, Position, as_rows


def rollup_specs(context: JobContext) -> list[tuple[RollupSpec, str]]:
    """Each rollup's spec, with the name of the table whose rows it reads."""
    return [(rollup, route.table) for route in context.config.routes.routes if not route.from_registry
            for rollup in context.spec_for(route).rollups]


def rollup_named(context: JobContext, name: str) -> tuple[RollupSpec, str]:
    for spec, table in rollup_specs(context):
        if spec.rollup.name == name:
            return spec, table
    names = ", ".join(rollup.name for rollup in context.config.rollups) or "none"
    raise ConfigError(f"{context.config.path}: no [rollup {name}] section; the job's rollups: {names}")


def table_files(context: JobContext, table: str) -> list[WarehouseFile]:
    """The committed files of one of the job's tables (a merged file once per range it holds)."""
    held = held_by_job(context.fs, context.config, context.store, context.located()).by_table.get(table)
    return held.files if held is not None else []


def rebuild_in_postgres(context: JobContext, spec: RollupSpec, files: list[WarehouseFile]) -> str:
    """The rollup's database rows made again from the partials of `files` (its table's committed
    files: table_files); what was done, to print."""
    database = context.rollup_databases[spec.rollup.name]
    fs, warehouse, store = context.fs, context.located(), context.store
    paths = sorted({partial_path(warehouse, spec.partials_table, file) for file in files})
    missing = [path for path in paths if not fs.exists(path)]
    if missing:
        raise RollupRefused(f"{spec.rollup.describe()}: {len(missing)} partials are missing, e.g. {missing[0]}: run "
                            f"`etl rollup rebuild --rollup {spec.rollup.name} --execute`, which computes them anew")
    route = rollup_route(spec.rollup, context.config.routes)
    positions = {key: Position(offset.value, 0) for key, offset in store.offsets.committed_offsets().items()
                 if route.chooses(key[0])}
    rows = merged_partials(fs, spec, paths)
    database.replace(spec, positions, as_rows(rows))
    return (f"{spec.rollup.describe()}: {spec.view} in {database.target.describe()} made again from {len(paths)} "
            f"partials: {rows.num_rows} groups, offsets of {len(positions)} partitions")


def moved_under(context: JobContext, changes: list[OffsetChange]) -> list[tuple[RollupSpec, str, str]]:
    """The rollups kept in PostgreSQL whose offsets there a reset's `changes` move back under:
    each with its table's name and why."""
    found = []
    for spec, table in rollup_specs(context):
        database = context.rollup_databases.get(spec.rollup.name)
        positions = database.positions(spec) if database is not None else {}
        under = [(c, positions[(c.topic, c.partition)].next_offset) for c in changes
                 if (c.topic, c.partition) in positions and c.new < positions[(c.topic, c.partition)].next_offset]
        if database is not None and under:
            c, held = under[0]
            found.append((spec, table, f"{spec.rollup.describe()}: {database.target.describe()} holds {c.topic}"
                                       f"[{c.partition}] up to offset {held}, and the reset moves it back to {c.new}: "
                                       f"a database cannot take rows out of a rollup (a minimum does not come apart); "
                                       f"add --rebuild-rollups, which makes its rows there again from the table's "
                                       f"partials once the reset is done"))
    return found


def check_in_postgres(context: JobContext, spec: RollupSpec, files: list[WarehouseFile],
                      open_batch: Batch | None, deep: bool, partials_whole: bool) -> list[Problem]:
    """`etl verify`'s look at a rollup's database: none of its offsets past ZooKeeper's committed
    ones (but the open batch's own); with `deep`, its rows are the partials of the ranges it holds
    merged (not compared while it is behind ZooKeeper: its next batch catches up; nor unless
    `partials_whole`, none missing: check_partials names those)."""
    database = context.rollup_databases[spec.rollup.name]
    where = f"{database.target.describe()} {spec.view}"
    route = rollup_route(spec.rollup, context.config.routes)
    committed = {key: offset.value for key, offset in context.store.offsets.committed_offsets().items()
                 if route.chooses(key[0])}
    positions = database.positions(spec)
    problems = offset_problems(spec, where, positions, committed, open_batch)
    behind = any(positions.get(key, Position(-1, 0)).next_offset < value for key, value in committed.items())
    if behind or not deep or not partials_whole:  # behind: the next batch catches up; the rows lack them till then
        return problems
    warehouse = context.located()
    held_open = open_batch is not None and any(p.batch_id == open_batch.batch_id for p in positions.values())
    skipped = {r.file_range for r in open_batch.file_ranges} if open_batch is not None and not held_open else set()
    paths = sorted({partial_path(warehouse, spec.partials_table, f) for f in files if f.range not in skipped})
    expected = as_rows(merged_partials(context.fs, spec, paths))
    return problems + row_problems(spec, where, database.rows(spec), expected)


def offset_problems(spec: RollupSpec, where: str, positions: dict[Partition, Position],
                    committed: dict[Partition, int], open_batch: Batch | None) -> list[Problem]:
    """Each partition whose offset in the database is past ZooKeeper's: the next run refuses it."""
    return [Problem("rollup_postgres_ahead", where, f"{spec.rollup.describe()}: the database holds {key[0]}:{key[1]} "
                    f"up to offset {found.next_offset}, past ZooKeeper's {committed.get(key)}: the next run refuses "
                    f"to add to it", REBUILD_ACTION.format(name=spec.rollup.name))
            for key, found in ahead_of_zookeeper(positions, committed, open_batch)]


def row_problems(spec: RollupSpec, where: str, held: list[tuple], expected: list[tuple]) -> list[Problem]:
    """The database's rows against the partials merged; a float sum may differ in its last bits
    (the database adds in another order)."""
    keys = len(spec.rollup.group_by)
    mine, theirs = {row[:keys]: row[keys:] for row in held}, {row[:keys]: row[keys:] for row in expected}
    differ = sorted((key for key in mine.keys() | theirs.keys()
                     if not _close(mine.get(key), theirs.get(key))), key=repr)
    if not differ:
        return []
    return [Problem("rollup_postgres_differs", where, f"{spec.rollup.describe()}: {len(differ)} groups differ from the "
                    f"table's partials merged, e.g. {differ[0]}: {mine.get(differ[0])} there, "
                    f"{theirs.get(differ[0])} in the partials", REBUILD_ACTION.format(name=spec.rollup.name))]


def _close(a: tuple | None, b: tuple | None) -> bool:
    if a is None or b is None:
        return a is b
    return all(math.isclose(x, y, rel_tol=1e-12) if isinstance(x, float) and isinstance(y, float) else x == y
               for x, y in zip(a, b))
