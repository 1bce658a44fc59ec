"""The binding of a job that fills several tables (etl.model.binding says why a job is bound).

A one-table job stays bound by a Target, byte for byte as before. A job with [route] sections is
bound by a RouteBinding: the database, the folder its tables live under, the rejected table, and
each route as the config drew it: its table (or template), its split, and the topics it chose.
Every run compares the config's routes with the bound ones (`binding_diff`); any difference is
refused, naming it and `etl bind`, which makes it on purpose:
- a route added, removed, or given another table or split;
- a committed topic whose records would now go to other tables (a route's topics edited so):
  its history stays where it was loaded, and the new rows would go elsewhere.
Editing a route's topics in a way that moves no committed topic (adding a new topic, say) is no
difference: the new topic starts as any new topic does.

The bound routes no longer in the config stay as `retired`, for the tables they loaded records
into: a route removed by `etl bind --stop-loading`, whole, and for each topic moved by `etl bind
--move-loaded` each route that loaded it, restricted to it (`retired_by_move`). `retired_tables`
reads them back, for the tables a command inspects (etl.ops.job_tables).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Container, Iterable, Mapping, Protocol

from etl.config.routes import ANY_OTHER_VALUE, FieldSplit, RouteConfig, Routes
from etl.config.topic_pattern import TopicPattern
from etl.config.model import HiveFormat
from etl.model.binding import BindingMismatch, Target, check_bound, check_plan, format_json, format_refusal
from etl.model.routes import PlanTables, route_topics


@dataclass(frozen=True)
class BoundRoute:
    name: str
    table: str  # a name, or a template holding {topic}
    field: str | None = None
    values: tuple[str, ...] = ()  # ("*",): the rest of the field's values
    topics: tuple[str, ...] = ()
    topics_regex: str | None = None

    @classmethod
    def of(cls, route: RouteConfig) -> "BoundRoute":
        split = route.split
        values = ((ANY_OTHER_VALUE,) if split.takes_the_rest else split.values) if split else ()
        return cls(route.name, route.table, split.field if split else None, values, route.topics,
                   route.topics_regex.pattern if route.topics_regex else None)

    def same_shape(self, other: "BoundRoute") -> bool:
        """Same table and split: the topics chosen may differ (binding_diff judges those by topic)."""
        return (self.table, self.field, self.values) == (other.table, other.field, other.values)

    def describe(self) -> str:
        split = f", {self.field} in ({', '.join(self.values)})" if self.field else ""
        return f"[route {self.name}] -> {self.table}{split}"

    def to_json(self) -> dict:
        raw: dict = {"name": self.name, "table": self.table}
        if self.field:
            raw.update(field=self.field, values=list(self.values))
        raw.update({"topics_regex": self.topics_regex} if self.topics_regex else {"topics": list(self.topics)})
        return raw

    @classmethod
    def from_json(cls, raw: dict) -> "BoundRoute":
        return cls(raw["name"], raw["table"], raw.get("field"), tuple(raw.get("values", ())),
                   tuple(raw.get("topics", ())), raw.get("topics_regex"))


@dataclass(frozen=True)
class RouteBinding:
    database: str
    root: str  # the Hive URI of the folder the tables' folders are in
    rejected_table: str
    rejected_location: str
    routes: tuple[BoundRoute, ...]
    # Routes `etl bind` removed (--stop-loading) and a moved topic's old routes, restricted to it
    # (--move-loaded): the tables they loaded records into, which `etl verify` still checks.
    retired: tuple[BoundRoute, ...] = ()
    file_format: HiveFormat = HiveFormat.PARQUET  # every route's table's; the rejected table's are Parquet

    @classmethod
    def of(cls, config, warehouse) -> "RouteBinding":
        """The config's routes, where its warehouse (etl.sink.warehouse) puts their tables."""
        return cls(config.hive.database, warehouse.hive_uri(warehouse.database_root), config.hive.rejected_table,
                   warehouse.hive_uri(warehouse.rejected_root), tuple(BoundRoute.of(r) for r in config.routes.routes),
                   file_format=config.hive.format)

    def location(self, table: str) -> str:
        return f"{self.root}/{table}"

    def describe(self) -> str:
        return f"{len(self.routes)} routes into {self.database} at {self.root}"

    def to_json(self) -> dict:
        return {"database": self.database, "root": self.root, "rejected_table": self.rejected_table,
                "rejected_location": self.rejected_location, "routes": [r.to_json() for r in self.routes],
                **({"retired": [r.to_json() for r in self.retired]} if self.retired else {}),
                **format_json(self.file_format)}

    @classmethod
    def from_json(cls, raw: dict) -> "RouteBinding":
        return cls(raw["database"], raw["root"], raw["rejected_table"], raw["rejected_location"],
                   tuple(BoundRoute.from_json(r) for r in raw["routes"]),
                   tuple(BoundRoute.from_json(r) for r in raw.get("retired", ())),
                   HiveFormat(raw.get("file_format", HiveFormat.PARQUET.value)))

    def retired_tables(self, topics: Iterable[str], routed_now: Container[str]) -> set[str]:
        """The tables retired routes loaded the `topics`' records into. A retired route counts for a
        topic it names (a moved topic's old routes name it alone), and for one its pattern matches
        only when no route of the config takes it now (`routed_now`): a pattern also matches topics
        created after it was retired, which it never loaded, into tables that may not exist."""
        retired = [(bound, _as_route(bound)) for bound in self.retired]
        tables = set()
        for topic in topics:
            for bound, route in retired:
                if route.chooses(topic) and (topic in bound.topics or topic not in routed_now):
                    try:
                        tables.add(route.table_for(topic))
                    except ValueError:  # no Hive name: it never loaded the topic
                        continue
        return tables - {self.rejected_table.lower()}  # table_for's names are lower-case

    def retired_owners(self, committed: Iterable[str], routes: Routes) -> dict[str, frozenset[str]]:
        """Each table the retired routes loaded records into, with the `committed` topics whose records
        it holds (as retired_tables counts them, `routes` being the config's): it stays theirs, and
        etl.model.routes.route_topics lets no other topic load into it."""
        committed = list(committed)
        routed_now = {topic for topic in committed if routes.of_topic(topic)}
        owners: dict[str, set[str]] = {}
        for topic in committed:
            for table in self.retired_tables([topic], routed_now):
                owners.setdefault(table, set()).add(topic)
        return {table: frozenset(topics) for table, topics in owners.items()}


def is_route_binding(raw: dict) -> bool:
    """A stored binding's JSON is a RouteBinding's (else a one-table job's Target)."""
    return "routes" in raw


JobBinding = Target | RouteBinding  # what a job is bound to: one table, or its routes


def binding_from_json(raw: dict) -> JobBinding:
    return RouteBinding.from_json(raw) if is_route_binding(raw) else Target.from_json(raw)


@dataclass(frozen=True)
class BindingDiff:
    added: tuple[BoundRoute, ...] = ()
    removed: tuple[BoundRoute, ...] = ()
    changed: tuple[tuple[BoundRoute, BoundRoute], ...] = ()  # (bound, in the config)
    moved: tuple[str, ...] = ()  # committed topics whose records would go to other tables
    stopped: tuple[str, ...] = ()  # committed topics whose records no route would load any more
    elsewhere: str | None = None  # another database, folder or rejected table
    # Committed topics a route still chooses but that cannot be routed (two routes take one whole, a
    # templated name no Hive name or the rejected table): (topic, why). Not stopped: wanted, and misrouted.
    unroutable: tuple[tuple[str, str], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed or self.moved or self.stopped or self.elsewhere
                    or self.unroutable)

    def describe(self) -> list[str]:
        return ([f"the job's tables would move: {self.elsewhere}"] if self.elsewhere else []) + \
            [f"added: {r.describe()}" for r in self.added] + \
            [f"removed: {r.describe()}" for r in self.removed] + \
            [f"changed: {old.describe()} becomes {new.describe()}" for old, new in self.changed] + \
            [f"topic {topic}'s records would go to other tables than they were loaded into" for topic in self.moved] + \
            [f"topic {topic}'s records would no longer be loaded" for topic in self.stopped] + \
            [f"topic {topic} cannot be routed: {why}" for topic, why in self.unroutable]


def binding_diff(bound: RouteBinding, current: RouteBinding, committed: Iterable[str],
                 loaded: Iterable[str] | None = None) -> BindingDiff:
    """`committed`: the topics with committed offsets; `loaded`: those of them that loaded records
    (loaded_topics; None: all of them), which alone can be moved or stopped: a topic that loaded
    nothing has nothing to leave behind, and goes to its new tables, or none, as a new topic."""
    elsewhere = None
    if (bound.database, bound.root, bound.rejected_table) != (current.database, current.root, current.rejected_table):
        elsewhere = (f"{bound.database} at {bound.root} (rejected rows in {bound.rejected_table}) becomes "
                     f"{current.database} at {current.root} (rejected rows in {current.rejected_table})")
    was = {r.name: r for r in bound.routes}
    now = {r.name: r for r in current.routes}
    committed = tuple(committed)
    loaded = committed if loaded is None else tuple(t for t in committed if t in set(loaded))
    was_tables = {topic: _tables_of(bound, topic) for topic in loaded}
    now_tables = {topic: _tables_of(current, topic) for topic in loaded}
    unroutable = {topic: why for topic in committed if (why := _why_unroutable(current, topic))}
    return BindingDiff(
        added=tuple(r for name, r in now.items() if name not in was),
        removed=tuple(r for name, r in was.items() if name not in now),
        changed=tuple((was[name], r) for name, r in now.items() if name in was and not was[name].same_shape(r)),
        moved=tuple(t for t in loaded if now_tables[t] and was_tables[t] != now_tables[t]
                    and not _back_in_its_tables(bound, t, was_tables[t], now_tables[t])),
        stopped=tuple(t for t in loaded if was_tables[t] and not now_tables[t] and t not in unroutable),
        elsewhere=elsewhere, unroutable=tuple(unroutable.items()))


def _back_in_its_tables(bound: RouteBinding, topic: str, was: dict[str, str], now: dict[str, str]) -> bool:
    """A topic stopped before (no bound route takes it) routed again into the very tables its
    retired routes loaded it into: it goes on where its records are, which is no move."""
    return not was and set(now.values()) == bound.retired_tables([topic], ())


class _Offset(Protocol):  # etl.state.znodes.CommittedOffset, which the model does not import
    @property
    def value(self) -> int: ...

    @property
    def origin(self) -> int | None: ...


def loaded_topics(offsets: Mapping[tuple[str, int], _Offset]) -> set[str]:
    """The topics that loaded records: a partition's committed offset past where the job started
    reading it (its origin; 0 when not recorded). An empty partition's first offset is committed
    by an empty range (etl.model.planner): committed, nothing loaded."""
    return {topic for (topic, _), offset in offsets.items()
            if offset.value > (offset.origin if offset.origin is not None else 0)}


def moved_tables(bound: RouteBinding, current: RouteBinding, topic: str) -> str:
    """A moved topic's tables, as they were and as they would be: `orders (orders -> sales)`. A
    topic stopped before (no bound route takes it) was in its retired routes' tables."""
    was = list(_tables_of(bound, topic).values()) or sorted(bound.retired_tables([topic], ()))
    return f"{topic} ({', '.join(was)} -> {', '.join(_tables_of(current, topic).values())})"


def retired_by_move(bound: RouteBinding, moved: Iterable[str]) -> tuple[BoundRoute, ...]:
    """For each moved topic, each route that loaded it, restricted to it (named `<route>/<topic>`):
    retired, they keep the tables that hold its records loaded so far. Those are the bound routes
    that take it, or, for a topic stopped before, the retired routes that did (by a pattern too,
    which counts for a topic no route takes, and would no longer once it is routed again)."""
    by_name = {route.name: route for route in bound.routes}
    return tuple(replace(route, name=f"{route.name}/{topic}", topics=(topic,), topics_regex=None)
                 for topic in moved for route in [by_name[name] for name in _tables_of(bound, topic)]
                 or [r for r in bound.retired if _as_route(r).chooses(topic)])


def into_retired(binding: RouteBinding, topics: Iterable[str], committed: Iterable[str],
                 routes: Routes) -> list[tuple[str, str, frozenset[str]]]:
    """Each of `topics` that `binding`'s routes send to a table its retired routes keep for other
    topics (RouteBinding.retired_owners): (topic, table, the topics whose records it holds)."""
    owners = binding.retired_owners(committed, routes)
    return [(topic, table, owners[table]) for topic in topics for table in _tables_of(binding, topic).values()
            if table in owners and topic not in owners[table]]


def _tables_of(binding: RouteBinding, topic: str) -> dict[str, str]:
    """Each route's table for `topic` under `binding` ({} when none chooses it, or it cannot be routed)."""
    routed = _routed(binding, topic).topics.get(topic)
    return dict(zip(routed.routes, routed.tables)) if routed else {}


def _why_unroutable(binding: RouteBinding, topic: str) -> str | None:
    """Why routes of `binding` choose `topic` and cannot route it, or None."""
    return next((u.why for u in _routed(binding, topic).unroutable), None)


def _routed(binding: RouteBinding, topic: str) -> PlanTables:
    routes = Routes(tuple(_as_route(r) for r in binding.routes))
    return route_topics(routes, [topic], committed=[topic], rejected_table=binding.rejected_table)


def _as_route(bound: BoundRoute) -> RouteConfig:
    split = None
    if bound.field:
        rest = bound.values == (ANY_OTHER_VALUE,)
        split = FieldSplit(bound.field, () if rest else bound.values, takes_the_rest=rest)
    return RouteConfig(bound.name, bound.table, schema_file=None, topics=bound.topics,
                       topics_regex=TopicPattern(bound.topics_regex) if bound.topics_regex else None, split=split)


def from_one_table(bound: Target, current: RouteBinding, committed: Iterable[str]) -> list[str]:
    """Why a one-table job cannot take the routes `current` without moving a record (none: it can,
    by `etl bind`): its table must keep its folder, its rejected table its own, and each topic with
    committed offsets must go, whole, to that table alone."""
    problems = []
    if bound.database != current.database or bound.location != current.location(bound.table):
        problems.append(f"the routes put the job's tables in {current.database} at {current.root}, which would "
                        f"move {bound.describe()}")
    if bound.rejected_location != current.rejected_location:
        problems.append(f"the rejected table {current.rejected_table} is at {current.rejected_location}, not at the "
                        f"job's {bound.rejected_location}: name the job's rejected table in [hive] rejected_table")
    for topic in sorted(set(committed)):
        tables = sorted(set(_tables_of(current, topic).values()))
        if tables != [bound.table]:
            problems.append(f"topic {topic}'s records were loaded into {bound.table}, and the routes would send "
                            f"them to {', '.join(tables) or 'no table'}")
    return problems


def check_job_binding(bound: JobBinding, current: JobBinding, config, committed: Callable[[], Iterable[str]]) -> None:
    """The config names what the job is bound to (etl.model.binding); `committed`: the topics
    with committed offsets, whose records must keep going to the tables they went to (read only
    when the config has routes: a one-table job's binding is its table)."""
    if isinstance(bound, Target) and isinstance(current, Target):
        check_bound(bound, current, config)
        return
    if isinstance(bound, RouteBinding) and isinstance(current, RouteBinding):
        if bound.file_format is not current.file_format:
            raise format_refusal(f"job {config.job.name}'s tables are", bound.file_format.value, current.file_format,
                                 "[hive] format")
        diff = binding_diff(bound, current, committed())
        if diff:
            raise BindingMismatch(f"job {config.job.name}'s [route] sections differ from the routes it is bound to: "
                                  f"{'; '.join(diff.describe())}. Nothing was touched. {routes_hint(config)}",
                                  not_loadable=tuple(topic for topic, _ in diff.unroutable))
        return
    turn = (f"turn it into a job with routes on purpose with `etl bind --config {config.path} --execute`"
            if isinstance(bound, Target) else "turning a job with routes into a one-table job is not built yet")
    raise BindingMismatch(f"job {config.job.name} is bound to {bound.describe()}, but the config names "
                          f"{current.describe()}. Nothing was touched: restore the config, or {turn}")


def check_planned(batch, current: JobBinding, config) -> None:
    """A batch is resumed into the tables it was planned for, or not at all."""
    if not batch.target:
        return
    if isinstance(current, Target) and not is_route_binding(batch.target):
        check_plan(batch, current, config)
    elif batch.target != current.to_json():
        raise BindingMismatch(f"batch {batch.batch_id} was planned to write to "
                              f"{binding_from_json(batch.target).describe()}, but the config names "
                              f"{current.describe()}; resuming it there would leave its files split between both. "
                              f"Nothing was touched: restore the config and run again to finish the batch")


def routes_hint(config) -> str:
    return (f"If the change is a mistake, restore the config; to make it on purpose, run `etl bind --config "
            f"{config.path}` to see it, then with --execute (see docs/configuration.md, '[route <name>]')")
