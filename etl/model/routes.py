"""Which tables each topic's records go to, for one plan: the config's routes (etl.config.routes)
applied to the topics Kafka lists now.

What the config alone cannot know is decided here, once per plan, by one rule each:
- a topic two routes choose (two patterns may both match it) must be split by one field, each
  value to one route (etl.config.routes.sharing_problem);
- a templated name must be a Hive name (etl.config.routes.table_name);
- two topics never share a table by a template's accident: when two topics' names make one
  table, a topic that already has committed offsets keeps it, and the others are not loaded;
  when none has, none is loaded, as nothing would say which to prefer. The job's rejected table
  and every route's fixed table count as taken. Several topics listed in one route with a fixed
  table share it on purpose, and that is no clash;
- a table `etl bind` retired (a route removed by --stop-loading, a topic moved by --move-loaded:
  etl.model.route_binding) holds its topics' records, and stays theirs: no new topic loads into
  it, by a template or a fixed table, though no route of the config names it any more. A topic
  with committed offsets goes where the binding says (a topic that shared the table with a moved
  one stays in it); `etl bind` moves none into another topic's retired table.

A topic that cannot be routed is not loaded and is reported with its reason (as a hidden topic
is): anyone may create a topic, and one odd name must not stop the job. No offset of it moves,
so nothing of it is lost once the config routes it. A topic with committed offsets that cannot
be routed any more is another matter (the config changed under it): the planner refuses to go
on, rather than stop loading it in silence.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Collection, Iterable, Mapping

from etl.config.routes import RouteConfig, Routes, sharing_problem


@dataclass(frozen=True)
class TopicSplit:
    """How a shared topic's records are told apart: the field, each listed value's table, and
    the table of every other value (None: such a record is rejected)."""

    field: str
    tables: dict[str, str]
    rest: str | None = None

    def table_of(self, value: str | None) -> str | None:
        return self.tables.get(value, self.rest) if value is not None else self.rest


@dataclass(frozen=True)
class TopicTables:
    """The tables a topic's records go to: one, or those of the routes that split it."""

    topic: str
    tables: tuple[str, ...]
    routes: tuple[str, ...]  # the routes' names, in the same order
    split: TopicSplit | None = None


@dataclass(frozen=True)
class Unroutable:
    topic: str
    why: str

    def describe(self) -> str:
        return f"topic {self.topic}: {self.why}"


@dataclass(frozen=True)
class PlanTables:
    """The routing of one plan: each routed topic's tables, and why the others are not loaded."""

    topics: dict[str, TopicTables] = field(default_factory=dict)
    unroutable: tuple[Unroutable, ...] = ()

    def tables(self) -> set[str]:
        return {table for routed in self.topics.values() for table in routed.tables}


def route_topics(routes: Routes, topics: Iterable[str], committed: Iterable[str], rejected_table: str,
                 retired: Mapping[str, Collection[str]] | None = None) -> PlanTables:
    """Route this plan's `topics`. `committed`: every topic with committed offsets, whether or not it
    is still loaded, so that a newcomer never takes a table that one of them has filled. `retired`:
    each table the job's binding retired, with the topics whose records it holds
    (etl.model.route_binding.RouteBinding.retired_owners), which no other topic may take."""
    candidates = dict.fromkeys(topics)
    committed = set(committed)
    unroutable: dict[str, str] = {}
    routed: dict[str, TopicTables] = {}
    for topic in dict.fromkeys([*candidates, *sorted(committed)]):
        chosen = routes.of_topic(topic)
        why = _cannot_route(topic, chosen)
        if why is not None:
            unroutable[topic] = why
        elif chosen:
            routed[topic] = topic_tables(topic, chosen)
    clashes = {**_clashes(routed, committed, routes, rejected_table),
               **_retired_clashes({t: r for t, r in routed.items() if t not in committed}, routes, retired or {})}
    for topic, why in clashes.items():
        routed.pop(topic, None)
        unroutable[topic] = why
    return PlanTables(topics={t: routed[t] for t in candidates if t in routed},
                      unroutable=tuple(Unroutable(t, unroutable[t]) for t in candidates if t in unroutable))


def _cannot_route(topic: str, chosen: tuple[RouteConfig, ...]) -> str | None:
    problem = sharing_problem(topic, chosen)
    if problem is not None:
        return problem
    for route in chosen:
        try:
            route.table_for(topic)
        except ValueError as exc:
            return f"{route.describe()} table = {route.table} makes {exc}; give the template a prefix, or route the " \
                   f"topic by a route of its own"
    return None


def topic_tables(topic: str, chosen: tuple[RouteConfig, ...]) -> TopicTables:
    """`topic`'s tables under the routes that choose it (which `_cannot_route` found sound)."""
    tables = tuple(route.table_for(topic) for route in chosen)
    names = tuple(route.name for route in chosen)
    if len(chosen) == 1 and chosen[0].split is None:
        return TopicTables(topic, tables, names)
    listed = {value: table for route, table in zip(chosen, tables) if route.split for value in route.split.values}
    rest = next((table for route, table in zip(chosen, tables) if route.split and route.split.takes_the_rest), None)
    split_field = next(route.split.field for route in chosen if route.split)
    return TopicTables(topic, tables, names, TopicSplit(split_field, listed, rest))


def _clashes(routed: dict[str, TopicTables], committed: set[str], routes: Routes,
             rejected_table: str) -> dict[str, str]:
    """The topics whose templated tables another topic, a fixed table or the rejected table takes."""
    fixed = {route.table: route for route in routes.routes if not route.templated}
    by_table: dict[str, list[str]] = {}
    for topic, tables in routed.items():
        for route_name, table in zip(tables.routes, tables.tables):
            if routes.by_name(route_name).templated:
                by_table.setdefault(table, []).append(topic)
    clashes: dict[str, str] = {}
    for table, topics in by_table.items():
        if table == rejected_table or table in fixed:
            taker = "the job's rejected table" if table == rejected_table else f"the table of {fixed[table].describe()}"
            clashes.update({topic: f"its table {table!r} is {taker}" for topic in topics})
            continue
        topics = list(dict.fromkeys(topics))
        if len(topics) < 2:
            continue
        loaded = [topic for topic in topics if topic in committed]
        keeper = loaded[0] if len(loaded) == 1 else None
        for topic in topics:
            if topic != keeper:
                others = ", ".join(t for t in topics if t != topic)
                clashes[topic] = f"its table {table!r} is also the table of topic {others}; " + (
                    f"{keeper} has loaded it and keeps it" if keeper else
                    "each of them has loaded it" if loaded else "no topic is preferred to another")
    return clashes


def _retired_clashes(routed: dict[str, TopicTables], routes: Routes,
                     retired: Mapping[str, Collection[str]]) -> dict[str, str]:
    """The (new) topics that a route sends to a retired table which holds other topics' records."""
    clashes: dict[str, str] = {}
    for topic, tables in routed.items():
        for route_name, table in zip(tables.routes, tables.tables):
            owners = retired.get(table, ())
            if owners and topic not in owners:
                route = routes.by_name(route_name)
                leave = "a topics_regex that leaves it out" if route.topics_regex else f"{topic} out of its topics"
                clashes[topic] = (f"its table {table!r} holds the records of topic {', '.join(sorted(owners))}, which "
                                  f"`etl bind` stopped loading or moved: the table stays that topic's, and no other "
                                  f"topic loads into it; give topic {topic} a table of its own ({route.describe()} "
                                  f"table), or {leave}")
    return clashes
