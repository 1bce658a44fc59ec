"""The [rollup <name>] sections: aggregates kept beside a table, grouped, over the rows a filter keeps.

    [rollup errors_per_minute]
    table      = errors_per_minute
    where      = level = 'ERROR'
    group_by   = minute(log_time)
    aggregates = count(*) as errors
    target     = postgresql://etl@db.example.com/dashboards     (optional: PostgreSQL too)
    password_file = /etc/etl/rollups.password

A rollup reads the rows of one of the job's tables: the job's table, or, with [route] sections,
the table of the route its `route` key names. Here each key is parsed (etl.config.rollup_filter,
etl.config.rollup_terms) and checked against the job's routes and tables; that the columns exist,
with types the terms take, is checked against the table's DDL when the job starts
(etl.model.rollup_columns), as the other columns the config names are.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from etl.config.keys import SectionKind
from etl.config.model import HIVE_NAME_RE, HiveConfig
from etl.config.rollup_filter import Expr, parse_filter
from etl.config.rollup_target import PostgresTarget, parse_target
from etl.config.rollup_terms import Aggregate, GroupKey, parse_aggregates, parse_group_by
from etl.config.routes import RouteConfig, Routes
from etl.config.section import Section, resolve, secret_file
from etl.errors import ConfigError

ROLLUP_SECTION = SectionKind.ROLLUP.prefix  # [rollup <name>]
PARTIALS_SUFFIX = "_partials"


@dataclass(frozen=True)
class RollupConfig:
    name: str
    table: str  # the rollup's Hive table, in [hive] database
    route: str  # the route whose table's rows it reads; "" in a job without [route] sections
    where: Expr | None  # None: every row
    group_by: tuple[GroupKey, ...]
    aggregates: tuple[Aggregate, ...]
    target: PostgresTarget | None = None  # None: the rollup is kept in Hive only

    def describe(self) -> str:
        return f"[rollup {self.name}]"

    @property
    def partials_table(self) -> str:
        """The table of its partials, one file per partition-batch (etl.model.rollup_table);
        `table` is the view that merges them."""
        return f"{self.table}{PARTIALS_SUFFIX}"


def rollup_sections(parser, path: Path, routes: Routes, hive: HiveConfig, routed: bool) -> tuple[RollupConfig, ...]:
    """`routed`: whether the config has [route] sections (else `routes` is its one implicit route)."""
    names = [section for section in parser.sections() if section.startswith(ROLLUP_SECTION)]
    rollups = tuple(_rollup(Section(parser, name, path), routes, hive, routed) for name in names)
    _check_tables(rollups, routes, hive, path)
    return rollups


def rollup_route(rollup: RollupConfig, routes: Routes) -> RouteConfig:
    """The route whose rows the rollup reads (checked to exist when the config was read)."""
    return next(route for route in routes.routes if route.name == rollup.route)


def _rollup(s: Section, routes: Routes, hive: HiveConfig, routed: bool) -> RollupConfig:
    name = s.name[len(ROLLUP_SECTION):].strip()
    if not HIVE_NAME_RE.match(name):
        raise ConfigError(f"{s.path}: [{s.name}]: {name!r} is not a valid rollup name; write [rollup <name>] with "
                          f"letters, digits and _")
    rollup = RollupConfig(
        name=name,
        table=s.get("table", convert=lambda raw: _table(raw, hive.database)),
        route=_route(s, routes, routed),
        where=s.get("where", convert=parse_filter),
        group_by=s.get("group_by", convert=parse_group_by),
        aggregates=s.get("aggregates", convert=parse_aggregates),
        target=_target(s),
    )
    s.reject_unknown()
    _check_built(s, rollup, routes, hive)
    clash = {key.name for key in rollup.group_by} & {aggregate.name for aggregate in rollup.aggregates}
    if clash:
        raise s.fail("aggregates", f"names {sorted(clash)[0]!r}, which group_by names too: each is a column of the "
                                   f"rollup's table")
    return rollup


def _target(s: Section) -> PostgresTarget | None:
    url = s.get("target", convert=str)
    try:
        url = url if url is None else parse_target(url)
    except ValueError as exc:  # the value is not echoed: it may hold a password
        raise s.fail("target", str(exc)) from None
    if url is None:
        if s.is_set("password_file"):
            raise s.fail("password_file", "applies only with target = postgresql://...; set target, or remove it")
        return None
    return PostgresTarget(url, password=secret_file(s, "password_file"),
                          password_file=s.get("password_file", convert=lambda raw: resolve(s.path.parent, raw)))


def _table(raw: str, database: str) -> str:
    """A Hive name, in [hive] database: `database.name` is taken when it names that database."""
    found, _, name = raw.lower().rpartition(".")
    if found and found != database:
        raise ValueError(f"a rollup lives in the job's database ([hive] database = {database}); write {name!r}")
    if not HIVE_NAME_RE.match(name):
        raise ValueError("not a valid Hive table name")
    return name


def _route(s: Section, routes: Routes, routed: bool) -> str:
    if not routed:
        if s.is_set("route"):
            raise s.fail("route", "a job without [route] sections rolls up its one table; leave route out")
        return ""
    route = s.get("route", required=True, convert=str)
    found = next((r for r in routes.routes if r.name == route), None)
    if found is None:
        raise s.fail("route", f"{route!r} is no [route] section; the job's routes: "
                              f"{', '.join(r.name for r in routes.routes)}")
    if found.templated:
        raise s.fail("route", f"[route {route}] fills a table per topic ({found.table}); a rollup reads one "
                              f"table: choose a route with one")
    if found.from_registry:
        raise s.fail("route", f"[route {route}] takes its columns from the Schema Registry; a rollup needs its "
                              f"table's columns when the job starts: choose a route with a DDL file")
    return route


def _check_built(s: Section, rollup: RollupConfig, routes: Routes, hive: HiveConfig) -> None:
    """What a rollup does not read yet is refused, naming the key, rather than left out of it."""
    if hive.partitioning.column is not None:
        raise ConfigError(f"{s.path}: [{s.name}]: a rollup of a table partitioned by event time ([hive] "
                          f"partition_by = column:{hive.partitioning.column}) is not built yet")
    if rollup_route(rollup, routes).split is not None:
        raise s.fail("route", f"[route {rollup.route}] takes its topics' records by a field; a rollup of a route "
                              f"that splits a topic is not built yet")


def _check_tables(rollups: tuple[RollupConfig, ...], routes: Routes, hive: HiveConfig, path: Path) -> None:
    """A rollup's table is a name of its own: not one of the job's tables, nor another rollup's."""
    taken = {route.table: route.describe() for route in routes.routes if not route.templated}
    taken[hive.rejected_table] = "[hive] rejected_table"
    for rollup in rollups:
        for name in (rollup.table, rollup.partials_table):
            if name in taken:
                raise ConfigError(f"{path}: {rollup.describe()} table: {name!r} is {taken[name]}'s table too; a "
                                  f"rollup has a table of its own, and one of its partials, {rollup.partials_table}")
            taken[name] = rollup.describe()
