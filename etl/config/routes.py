"""The [route <name>] sections: which records go to which Hive table, when one job fills several.

A route chooses topics (a list, or a pattern) and sends their records to one table, or to a table
named after each topic (`table = raw_{topic}`). Routes that share a topic split it by the value
of one field of the decoded record (`field`, `values`; `values = *` takes the values no other
route of that topic lists). Each route names its DDL file, or `registry` to derive the table from
the subject's latest schema, and may take its own decoder, transform and dimensions.

A config without [route] sections is one implicit route: [hive] table and schema, [kafka]'s
topics, [job]'s decoder and transform, every dimension (`implicit_routes`). What can be checked
without Kafka is checked here; which topics a pattern matches, and so which tables they make,
is known only when a batch is planned (`table_name` is the one rule for a templated name).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable

from etl.config.kafka import topic_choice
from etl.config.model import (
    HIVE_NAME_RE, DecoderKind, DimensionConfig, FixedAvroSchema, HiveConfig, JobConfig, KafkaConfig,
)
from etl.config.keys import SectionKind
from etl.config.section import TRANSFORM_RE, Section, matching, resolve
from etl.config.topic_pattern import TopicPattern
from etl.errors import ConfigError

ROUTE_SECTION = SectionKind.ROUTE.prefix  # [route <name>]
TOPIC_PLACEHOLDER = "{topic}"
REGISTRY_SCHEMA = "registry"  # schema = registry: the table follows the subject's latest schema
ANY_OTHER_VALUE = "*"
ROUTE_NAME_RE = re.compile(r"^[A-Za-z0-9_]{1,64}$")
_NOT_IN_A_HIVE_NAME = re.compile(r"[^a-z0-9_]")


@dataclass(frozen=True)
class FieldSplit:
    """`field` and `values` of a route that shares its topics with other routes."""

    field: str
    values: tuple[str, ...]  # the field's values this route takes; empty with takes_the_rest only
    takes_the_rest: bool = False  # values = *: every value no other route of the topic lists


# The section each key of the implicit route is set in (implicit_routes).
IMPLICIT_SECTIONS = {"table": "hive", "schema": "hive", "topics": "kafka", "topics_regex": "kafka", "decoder": "job",
                     "avro_schema": "job", "transform": "job"}


@dataclass(frozen=True)
class RouteConfig:
    name: str  # "" for the implicit route of a config without [route] sections
    table: str  # a Hive table name, or a template holding {topic}
    schema_file: Path | None  # the DDL; None: derived from the Schema Registry (schema = registry)
    topics: tuple[str, ...] = ()  # empty when topics_regex chooses the topics
    topics_regex: TopicPattern | None = None
    split: FieldSplit | None = None
    decoder: DecoderKind = DecoderKind.JSON
    avro_schema: FixedAvroSchema | None = None
    transform: str | None = None  # module:function
    dimensions: tuple[str, ...] = ()  # the [dimension <name>] sections this route joins or hands on

    @property
    def templated(self) -> bool:
        return TOPIC_PLACEHOLDER in self.table

    @property
    def from_registry(self) -> bool:
        return self.schema_file is None

    def chooses(self, topic: str) -> bool:
        if self.topics_regex is not None:
            return self.topics_regex.fullmatch(topic)
        return topic in self.topics

    def table_for(self, topic: str) -> str:
        """The table this route writes `topic`'s records to (ValueError: no Hive name)."""
        return table_name(self.table, topic)

    def describe(self) -> str:
        return f"[route {self.name}]" if self.name else "[hive] table"

    def in_messages(self) -> str:
        """` in [route x]`, as a message says where a route's need comes from; "" for the implicit route."""
        return f" in {self.describe()}" if self.name else ""

    def key_where(self, key: str) -> str:
        """Where this route's `key` is set, as messages name it: `[route x] key`, or, for the implicit
        route of a config without [route] sections, the key of [hive], [kafka] or [job] it comes from."""
        return f"[route {self.name}] {key}" if self.name else f"[{IMPLICIT_SECTIONS[key]}] {key}"


@dataclass(frozen=True)
class Routes:
    """The job's routes, in the config's order; `implicit` for a config without [route] sections."""

    routes: tuple[RouteConfig, ...]
    implicit: bool = False

    def of_topic(self, topic: str) -> tuple[RouteConfig, ...]:
        return tuple(route for route in self.routes if route.chooses(topic))

    def topics_chooser(self, kafka: KafkaConfig) -> str:
        """What chooses the job's topics, as messages name it: a [kafka] key, or the routes."""
        return f"[kafka] {kafka.topics_key}" if self.implicit else "the [route] sections"

    def refuse_routes(self, what: str) -> None:
        """`what` (a command) does not take [route] sections yet: refused (exit 2), nothing touched."""
        if not self.implicit:
            raise ConfigError(f"{what} does not take [route] sections yet; nothing was touched")

    def by_name(self, name: str) -> RouteConfig:
        for route in self.routes:
            if route.name == name:
                return route
        raise KeyError(name)


def implicit_routes(hive: HiveConfig, kafka: KafkaConfig, job: JobConfig, dimensions: Iterable[str]) -> Routes:
    """The one route of a config without [route] sections: [hive] table and schema, [kafka]'s
    topics, [job]'s decoder and transform, and every dimension."""
    route = RouteConfig(name="", table=hive.the_table, schema_file=hive.schema_file, topics=kafka.topics,
                        topics_regex=kafka.topics_regex, decoder=job.decoder, avro_schema=job.avro_schema,
                        transform=job.transform, dimensions=tuple(dimensions))
    return Routes((route,), implicit=True)


def table_name(template: str, topic: str) -> str:
    """The documented rule: {topic} replaced by the topic's name, the whole lower-cased, and every
    character Hive cannot take in a name (anything but a-z, 0-9 and _; Kafka's names add only .
    and -) replaced by _. The result must be a Hive name (a letter or _ first, at most 128
    characters); it is never cut short or hashed, as two topics must never share a table by
    accident. ValueError when it is not one."""
    name = _NOT_IN_A_HIVE_NAME.sub("_", template.replace(TOPIC_PLACEHOLDER, topic).lower())
    if not HIVE_NAME_RE.match(name):
        raise ValueError(f"{name!r} is not a Hive table name (a letter or _ first, at most 128 characters)")
    return name


def route_sections(parser, path: Path) -> list[str]:
    return [section for section in parser.sections() if section.startswith(ROUTE_SECTION)]


def parse_routes(parser, path: Path, default_decoder: DecoderKind, dimensions: tuple[DimensionConfig, ...],
                 rejected_table: str, avro_schema_file) -> Routes:
    """The [route <name>] sections, each checked alone and then against each other. `avro_schema_file`
    reads and checks an .avsc file (etl.config.parse's, shared with [job] avro_schema)."""
    known_dimensions = {d.name for d in dimensions}
    sections = route_sections(parser, path)
    routes = tuple(_route(Section(parser, name, path), default_decoder, known_dimensions, avro_schema_file)
                   for name in sections)
    _check_names(sections, routes, path)
    _check_together(routes, rejected_table, path)
    _check_dimensions(routes, dimensions, path)
    return Routes(routes)


def _route(s: Section, default_decoder: DecoderKind, dimensions: set[str], avro_schema_file) -> RouteConfig:
    name = s.name[len(ROUTE_SECTION):].strip()
    if not ROUTE_NAME_RE.match(name):
        raise ConfigError(f"{s.path}: [{s.name}]: {name!r} is not a valid route name; write [route <name>] with "
                          f"letters, digits and _")
    topics, topics_regex = topic_choice(s)
    route = RouteConfig(
        name=name, table=s.get("table", convert=_table),
        schema_file=s.get("schema", convert=lambda raw: _schema(s, raw)),
        topics=topics, topics_regex=topics_regex, split=_split(s),
        decoder=s.choice("decoder", default_decoder),
        avro_schema=s.get("avro_schema", convert=lambda raw: avro_schema_file(resolve(s.path.parent, raw))),
        transform=s.get("transform", convert=matching(TRANSFORM_RE, "module:function reference")),
        dimensions=s.get("dimensions", (), lambda raw: _dimensions(raw, dimensions)),
    )
    s.reject_unknown()
    _check_alone(s, route)
    return route


def _table(raw: str) -> str:
    if "{" in raw.replace(TOPIC_PLACEHOLDER, "") or "}" in raw.replace(TOPIC_PLACEHOLDER, ""):
        raise ValueError("the only placeholder a table name takes is {topic}")
    if TOPIC_PLACEHOLDER not in raw:
        if not HIVE_NAME_RE.match(raw):
            raise ValueError("not a Hive table name; write a name, or a template with {topic}")
        return raw.lower()
    table_name(raw, "x")  # what no topic can mend: a digit first, or a name too long already
    return raw


def _schema(s: Section, raw: str) -> Path | None:
    if raw == REGISTRY_SCHEMA:
        return None
    schema = resolve(s.path.parent, raw)
    if not schema.is_file():
        raise ValueError(f"file {schema} does not exist (or write registry, to derive the table from the "
                         f"Schema Registry)")
    return schema


def _split(s: Section) -> FieldSplit | None:
    field = s.get("field", convert=matching(HIVE_NAME_RE, "column name"))
    values = s.get("values", convert=_values)
    if (field is None) != (values is None):
        missing = "values" if values is None else "field"
        raise s.fail(missing, "is required with " + ("field" if missing == "values" else "values") +
                     ": a route that splits its topics names the field and the values it takes")
    if field is None:
        return None
    if values == (ANY_OTHER_VALUE,):
        return FieldSplit(field.lower(), (), takes_the_rest=True)
    return FieldSplit(field.lower(), values)


def _values(raw: str) -> tuple[str, ...]:
    values = tuple(v.strip() for v in raw.split(",") if v.strip())
    if not values:
        raise ValueError("names no value; list the field's values, separated by commas, or write *")
    if ANY_OTHER_VALUE in values and len(values) > 1:
        raise ValueError("* stands alone: it takes every value no other route of the topic lists")
    if len(set(values)) != len(values):
        raise ValueError("a value is listed twice")
    return values


def _dimensions(raw: str, known: set[str]) -> tuple[str, ...]:
    names = tuple(n.strip() for n in raw.split(",") if n.strip())
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"no [dimension {unknown[0]}] section; known: {sorted(known) or 'none'}")
    return names


def _check_alone(s: Section, route: RouteConfig) -> None:
    if route.avro_schema is not None and route.decoder is not DecoderKind.AVRO:
        raise s.fail("avro_schema", "applies only to decoder = avro")
    if route.from_registry and not route.decoder.reads_writer_schemas:
        raise s.fail("schema", f"registry derives the table from the subject's schema, which decoder = "
                               f"{route.decoder} does not have; name a DDL file, or set decoder = avro or protobuf")
    if route.from_registry and route.avro_schema is not None:
        raise s.fail("avro_schema", "fixes one schema, and schema = registry reads the subject's; set one of them")
    if route.from_registry and not route.templated and (route.topics_regex is not None or len(route.topics) > 1):
        raise s.fail("schema", "registry follows one subject: over several topics, name the table with {topic} "
                               "(one table per topic), or name a DDL file")


def _check_names(sections: list[str], routes: tuple[RouteConfig, ...], path: Path) -> None:
    """One section per route: the name is the section's stripped, so sections that differ by
    whitespace alone would be two routes of one name, and a route is bound and found by its name."""
    first: dict[str, str] = {}
    for section, route in zip(sections, routes):
        if route.name in first:
            raise ConfigError(f"{path}: [{first[route.name]}] and [{section}] both name route {route.name!r}; "
                              f"give each route a name of its own, or merge the two sections")
        first[route.name] = section


def _check_together(routes: tuple[RouteConfig, ...], rejected_table: str, path: Path) -> None:
    static: dict[str, RouteConfig] = {}
    for route in routes:
        if route.templated:
            continue
        if route.table == rejected_table:
            raise ConfigError(f"{path}: {route.describe()} table: {route.table!r} is the job's rejected table "
                              f"([hive] rejected_table); name another table")
        if route.table in static:
            raise ConfigError(f"{path}: {route.describe()} table: {route.table!r} is already the table of "
                              f"{static[route.table].describe()}; one route per table (list several topics in "
                              f"one route to load them into one table)")
        static[route.table] = route
    for topic in dict.fromkeys(topic for route in routes for topic in route.topics):
        problem = sharing_problem(topic, tuple(route for route in routes if route.chooses(topic)))
        if problem:
            raise ConfigError(f"{path}: {problem}")


def _check_dimensions(routes: tuple[RouteConfig, ...], dimensions: tuple[DimensionConfig, ...], path: Path) -> None:
    """Each dimension is listed by a route (else it would be loaded and pinned for nothing); one
    without join_key is handed to the transform of each route listing it, which must have one; a
    joined one fills columns of a DDL file's table (a registry route's columns are the subject's)."""
    for dimension in dimensions:
        listing = [route for route in routes if dimension.name in route.dimensions]
        if not listing:
            raise ConfigError(f"{path}: [dimension {dimension.name}]: no [route] lists it in dimensions, so it would "
                              f"be loaded for nothing; list it in the routes that use it, or remove the section")
        for route in listing:
            if not dimension.joined and route.transform is None:
                raise ConfigError(f"{path}: {route.describe()} dimensions: [dimension {dimension.name}] has no "
                                  f"join_key, so it is only handed to the route's transform, which is not set")
            if dimension.joined and route.from_registry:
                raise ConfigError(f"{path}: {route.describe()} dimensions: [dimension {dimension.name}] fills "
                                  f"columns by join_key, and a table derived from the Schema Registry has its "
                                  f"subject's fields as columns, none filled by a dimension; join it in a route "
                                  f"with a DDL file")


def sharing_problem(topic: str, routes: tuple[RouteConfig, ...]) -> str | None:
    """Why the routes that choose `topic` cannot share it, or None. One route needs no split;
    several split it by one field, read by one decoder, each value going to one route, with at
    most one taking the rest. Checked for the listed topics at start-up, and for every topic at
    every plan (a pattern's topics are known only then)."""
    if len(routes) < 2:
        return None
    names = " and ".join(route.describe() for route in routes)
    whole = [route for route in routes if route.split is None]
    if whole:
        return (f"{whole[0].describe()} takes all of topic {topic!r}, which {names} choose; routes that share a "
                f"topic split it: give each field and values")
    splits = [route.split for route in routes if route.split is not None]
    if len({split.field for split in splits}) > 1:
        return f"{names} split topic {topic!r} by different fields; a topic is split by one field"
    if len({(route.decoder, route.avro_schema) for route in routes}) > 1:
        return (f"{names} read topic {topic!r} with different decoders; the field is read before the route is "
                f"known, so the routes of one topic share decoder and avro_schema")
    if sum(split.takes_the_rest for split in splits) > 1:
        return f"{names} both take the rest of topic {topic!r} (values = *); one route may"
    taken_by: dict[str, RouteConfig] = {}
    for route, split in ((route, route.split) for route in routes if route.split is not None):
        for value in split.values:
            if value in taken_by:
                return (f"{taken_by[value].describe()} and {route.describe()} both take {split.field} = {value!r} "
                        f"of topic {topic!r}; a value goes to one route")
            taken_by[value] = route
    return None


def check_buildable(routes: Routes, path: Path) -> None:
    """Refuse what a routed job does not do yet, naming the key, rather than do it for one table
    and not the others: a refusal touches nothing (exit 2). Event time, markers, metrics and
    compaction are built, per table (etl.job.event_task, etl.sink.markers, etl.ops.metrics_tables,
    etl.compaction.tables), and dimensions, per route.
    `schema = registry` is built (etl.job.registry_tables), but a job needs one table known at
    start-up (its writer spec and partitions: etl.context.job): a route with a DDL file, or a
    registry route's listed topic."""
    if routes.implicit:
        return
    if all(route.from_registry and not route.topics for route in routes.routes):
        raise ConfigError(f"{path}: {routes.routes[0].describe()} topics_regex: a job whose every route follows the "
                          f"Schema Registry by a topics pattern is not built yet; list one route's topics, or add a "
                          f"route with a DDL file")


def with_routed_topics(kafka: KafkaConfig, routes: Routes) -> KafkaConfig:
    """[kafka] with the topics the routes choose: the listed topics, or, when a route takes a
    pattern, one pattern matching any route's topics (each listed topic matched as itself)."""
    listed = tuple(dict.fromkeys(topic for route in routes.routes for topic in route.topics))
    patterns = [route.topics_regex.pattern for route in routes.routes if route.topics_regex is not None]
    if not patterns:
        return replace(kafka, topics=listed, topics_regex=None)
    union = "|".join(f"(?:{p})" for p in [*patterns, *(re.escape(topic) for topic in listed)])
    return replace(kafka, topics=(), topics_regex=TopicPattern(union))
