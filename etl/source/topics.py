"""Which topics a job reads, and which it does not: the same answer for every command.

[kafka] topics names them; [kafka] topics_regex chooses, at every plan, the broker's topics whose
whole name it matches (fullmatch, by RE2 in linear time: etl.config.topic_pattern), so a topic
created later is picked up by the next plan like a topic added to the list. The regex never
chooses Kafka's internal topics (`__...`); a pattern written to reach them (its text has `__`, as
`__consumer_offsets` has) hears so, once per command, and `etl status` lists them as not loaded,
while `.*` skips them without a word. A topic it matches whose name Hive would hide (starting with
'_' or '.': the files are named after the topic, and Hive and Spark skip such files) is never
loaded; it is reported instead of failing the job, because anyone may create `_schemas` on a
shared cluster.

With [route] sections, a chosen topic that no table can take (etl.model.routes: its templated name
is no Hive name, or another topic's table) is not loaded either, and reported with why.

A topic the job committed offsets of but reads no more (deleted from Kafka, or no longer chosen)
is reported too, never silently forgotten: its files stay in the table, and `etl verify` still
checks them against its committed offsets.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Callable, Collection, Iterable, Mapping

from etl.config import KafkaConfig
from etl.config.kafka import HIDDEN_FILE_PREFIXES
from etl.config.routes import Routes
from etl.config.topic_pattern import TopicPattern
from etl.model.routes import PlanTables, Unroutable, route_topics

INTERNAL_TOPIC_PREFIX = "__"  # __consumer_offsets, __transaction_state, ...


@dataclass(frozen=True)
class JobTopics:
    loaded: tuple[str, ...]  # the topics the job reads, in the config's order (a regex's: sorted)
    hidden: tuple[str, ...] = ()  # matched by topics_regex, never loaded: Hive would hide their files
    internal: tuple[str, ...] = ()  # Kafka's own topics that a pattern naming `__` matched, never loaded
    unroutable: tuple[Unroutable, ...] = ()  # chosen by a [route], but no table can take them
    tables: PlanTables | None = None  # with [route] sections: each loaded topic's tables


@dataclass(frozen=True)
class TopicRouting:
    """[route] sections applied to the topics chosen now (etl.model.routes). `committed_topics`:
    every topic with committed offsets, read when asked, so that a newcomer never takes a table
    one of them fills; `retired_tables`: of those, the tables `etl bind` retired, each with the
    committed topics it holds (etl.model.route_binding.RouteBinding.retired_owners), which stay theirs."""

    routes: Routes
    rejected_table: str
    committed_topics: Callable[[], Iterable[str]]
    retired_tables: Callable[[set[str]], Mapping[str, Collection[str]]] = lambda committed: {}

    def apply(self, topics: JobTopics) -> JobTopics:
        committed = set(self.committed_topics())
        tables = route_topics(self.routes, topics.loaded, committed, self.rejected_table,
                              self.retired_tables(committed))
        return replace(topics, loaded=tuple(t for t in topics.loaded if t in tables.topics),
                       unroutable=tables.unroutable, tables=tables)


def matching_topics(pattern: TopicPattern, names: Iterable[str]) -> JobTopics:
    """The topics among `names` that `pattern` matches whole, less Kafka's internal ones (set
    apart when the pattern names `__`); those whose names Hive would hide are set apart."""
    everything = sorted(name for name in set(names) if pattern.fullmatch(name))
    internal = tuple(name for name in everything if name.startswith(INTERNAL_TOPIC_PREFIX))
    matched = [name for name in everything if name not in internal]
    hidden = tuple(name for name in matched if name.startswith(HIDDEN_FILE_PREFIXES))
    named = INTERNAL_TOPIC_PREFIX in pattern.pattern
    return JobTopics(tuple(name for name in matched if name not in hidden), hidden, internal if named else ())


class NotLoadedReason(StrEnum):
    """Why a topic the job knows of is not loaded."""

    HIDDEN = "hidden"  # matches topics_regex, but its name starts with '_' or '.'
    INTERNAL = "internal"  # matches a topics_regex that names `__`, but is one of Kafka's own topics
    DELETED = "deleted"  # has committed offsets, and Kafka no longer has it
    UNCHOSEN = "unchosen"  # has committed offsets, and is in Kafka, but [kafka] no longer chooses it
    UNROUTABLE = "unroutable"  # chosen by a [route], but no table can take it (etl.model.routes)


@dataclass(frozen=True)
class NotLoadedTopic:
    topic: str
    reason: NotLoadedReason
    committed: dict[int, int]  # partition -> committed offset, as ZooKeeper keeps them
    why: str = ""  # UNROUTABLE: why no table can take it

    def describe(self, chooser: str) -> str:
        """`chooser`: what chooses the job's topics (Config.topics_chooser)."""
        if self.reason is NotLoadedReason.UNROUTABLE:
            return f"{self.topic}: {self.why}; not loaded, and none of its offsets move, until a route gives it a table"
        if self.reason is NotLoadedReason.HIDDEN:
            return (f"{self.topic}: matches {chooser}, but its name starts with {self.topic[0]!r}, and "
                    f"Hive and Spark skip files whose names start with '_' or '.'; never loaded")
        if self.reason is NotLoadedReason.INTERNAL:
            return (f"{self.topic}: matches {chooser}, but it is one of Kafka's internal topics (its "
                    f"name starts with '__'), which the job never loads")
        why = "deleted from Kafka" if self.reason is NotLoadedReason.DELETED else \
            f"no longer chosen by {chooser}"
        return (f"{self.topic}: {why}; its committed offsets of {len(self.committed)} partitions stay in ZooKeeper "
                f"and its files in the table (`etl verify` checks them)")

    def to_json(self, chooser: str) -> dict:
        return {"topic": self.topic, "reason": str(self.reason), "detail": self.describe(chooser),
                "committed": {str(p): offset for p, offset in sorted(self.committed.items())}}


def not_loaded_topics(topics: JobTopics, committed: dict[tuple[str, int], int],
                      on_broker: Iterable[str]) -> list[NotLoadedTopic]:
    """The internal and hidden topics, then each topic with committed offsets (partition -> offset) that the
    job no longer reads, with why."""
    on_broker, loaded = set(on_broker), set(topics.loaded)
    left: dict[str, dict[int, int]] = {}
    for (topic, partition), offset in committed.items():
        if topic not in loaded:
            left.setdefault(topic, {})[partition] = offset
    unroutable = [NotLoadedTopic(u.topic, NotLoadedReason.UNROUTABLE, left.pop(u.topic, {}), u.why)
                  for u in topics.unroutable]
    return [NotLoadedTopic(topic, NotLoadedReason.INTERNAL, {}) for topic in topics.internal] + [
        NotLoadedTopic(topic, NotLoadedReason.HIDDEN, {}) for topic in topics.hidden] + unroutable + [
        NotLoadedTopic(topic, NotLoadedReason.UNCHOSEN if topic in on_broker else NotLoadedReason.DELETED, offsets)
        for topic, offsets in sorted(left.items())]


def missing_topic_todo(config: KafkaConfig, routes: Routes | None, topic: str) -> str:
    """What to do about a chosen topic Kafka does not have, naming the key that chose it: [kafka]
    topics or topics_regex, or with [route] sections (`routes`) each route's (a routed job's [kafka]
    keys are the routes' topics put together: etl.config.routes.with_routed_topics)."""
    if routes is None:
        return "create it, or remove it from [kafka] topics" if config.topics_regex is None else \
            "it was deleted after [kafka] topics_regex matched it; run again"
    listing = [route for route in routes.of_topic(topic) if topic in route.topics]
    if listing:
        return f"create it, or remove it from {' and '.join(f'{r.describe()} topics' for r in listing)}"
    matching = " and ".join(f"{r.describe()} topics_regex" for r in routes.of_topic(topic)) or "a [route] topics_regex"
    return f"it was deleted after {matching} matched it; run again"
