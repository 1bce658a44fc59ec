"""A rollup's PostgreSQL rows and offsets made again from the partials its Hive table holds: for
`etl rollup rebuild` (after it computed the partials anew), and for `etl reset-offsets
--rebuild-rollups` (after a reset moved offsets back under what the database holds, which it
cannot subtract: a minimum does not come apart).

The partials of the table's committed ranges, merged, replace the database's rows, and its offsets
become ZooKeeper's committed offsets, in one transaction (etl.postgres.rollup_db). Under the job's
lock with no batch open, so the partials and the offsets say the same.
"""
from __future__ import annotations

from etl.config.rollups import rollup_route
from etl.context.job import JobContext
from etl.errors import ConfigError, RollupRefused
from etl.job.rollup_mirror import merged_partials
from etl.model.events import OffsetChange
from etl.model.rollup_table import RollupSpec
from etl.ops.job_tables import held_by_job
from etl.ops.rollup_files import partial_path
from etl.postgres.rollup_db import Position, as_rows


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


def rebuild_in_postgres(context: JobContext, spec: RollupSpec, table: str) -> str:
    """The rollup's database rows made again from the table's partials; what was done, to print."""
    database = context.rollup_databases[spec.rollup.name]
    fs, warehouse, store = context.fs, context.located(), context.store
    held = held_by_job(fs, context.config, store, warehouse).by_table.get(table)
    paths = sorted({partial_path(warehouse, spec.partials_table, file) for file in (held.files if held else [])})
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
