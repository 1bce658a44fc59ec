"""Every key the ETL reads from its config, one entry each: section, name, type, default, what it
does, whether it holds a secret, and the Kafka Connect HDFS sink's or Spark's setting that does
the same job, as Kafka Connect's ConfigDef keeps them.

The table is the one place a key's default is written: `Section` (etl.config.section) takes the
default and, for plain types, the converter from here, and refuses to read a key that is not
here. docs/configuration.md and conf/example-production.ini are checked against it
(tests/unit/test_config_keys.py), and `etl config` masks the values of the keys marked secret.
Pass-through settings are not entries: [spark] entire, and [kafka]'s librdkafka keys
(`ssl.ca.location`, `sasl.password`, ...), which librdkafka judges itself (etl.config.kafka).
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from enum import Enum, StrEnum

from etl.config.model import (
    Compression, DecoderKind, DimensionChangePolicy, HiveFormat, LateData, MetastoreClient, MissingEventTime,
    OutOfRangePolicy, ParquetReaders, PartitionCapAction, StartingOffsets, WarehouseAuth, ZooKeeperAuth,
)
from etl.config.partitioning import FutureData
from etl.errors import EtlError


class SectionKind(StrEnum):
    """A section, as docs/configuration.md heads it; the last three stand for any number of sections."""

    JOB = "job"
    KAFKA = "kafka"
    ZOOKEEPER = "zookeeper"
    WAREHOUSE = "warehouse"
    HIVE = "hive"
    SCHEMA_REGISTRY = "schema_registry"
    COMPACTION = "compaction"
    METRICS = "metrics"
    RETRY = "retry"
    JVM = "jvm"
    DIMENSION = "dimension <name>"
    ROUTE = "route <name>"
    ROLLUP = "rollup <name>"

    @property
    def prefix(self) -> str:
        """What a named section's header starts with ("route "); empty for the others."""
        return self.value.removesuffix("<name>") if self.value.endswith(" <name>") else ""


class ValueKind(Enum):
    """What a key's value is. TEXT, INTEGER, NUMBER and BOOLEAN have a plain converter
    (etl.config.section); CHOICE names one of `Key.choices`; the others are checked by the
    code that reads them."""

    TEXT = "text"
    INTEGER = "integer"
    NUMBER = "number"
    BOOLEAN = "boolean"
    CHOICE = "choice"
    LIST = "comma-separated list"
    PATH = "path"
    URL = "URL"


class Absent(Enum):
    """A key without a default: the config must set it, or leaving it out means "none"."""

    REQUIRED = "required"
    UNSET = "unset"


@dataclass(frozen=True)
class Derived:
    """A default that depends on other settings, worked out where the key is read (the code
    passes it); `description` is how docs/configuration.md's default column words it."""

    description: str


# A default is written as the INI text an operator would write, and converted by the same code as
# a written value, so a default can never be one the key itself would refuse.
Default = str | Absent | Derived
REQUIRED, UNSET = Absent.REQUIRED, Absent.UNSET
TEXT, INTEGER, NUMBER, BOOLEAN = ValueKind.TEXT, ValueKind.INTEGER, ValueKind.NUMBER, ValueKind.BOOLEAN
CHOICE = ValueKind.CHOICE
LIST, PATH, URL = ValueKind.LIST, ValueKind.PATH, ValueKind.URL
JOB, KAFKA, ZOOKEEPER = SectionKind.JOB, SectionKind.KAFKA, SectionKind.ZOOKEEPER
WAREHOUSE, HIVE = SectionKind.WAREHOUSE, SectionKind.HIVE
REGISTRY, COMPACTION, METRICS, RETRY, JVM = SectionKind.SCHEMA_REGISTRY, SectionKind.COMPACTION, SectionKind.METRICS, \
    SectionKind.RETRY, SectionKind.JVM
DIMENSION, ROUTE, ROLLUP = SectionKind.DIMENSION, SectionKind.ROUTE, SectionKind.ROLLUP


@dataclass(frozen=True)
class Key:
    section: SectionKind
    name: str
    kind: ValueKind
    default: Default
    doc: str
    choices: type[StrEnum] | None = None  # with kind CHOICE: the values it takes, in their order
    secret: bool = False  # its value is masked by `etl config`, and its line takes no comment
    connect: str | None = None  # the Kafka Connect HDFS sink's setting that does the same job
    spark: str | None = None  # Spark's setting (or its Kafka source's option) that does the same job

    def __post_init__(self) -> None:
        if (self.kind is CHOICE) != (self.choices is not None):
            raise TypeError(f"[{self.section}] {self.name}: choices go with kind CHOICE, and only with it")
        if self.choices is not None and isinstance(self.default, str) and self.default not in tuple(self.choices):
            raise TypeError(f"[{self.section}] {self.name}: default {self.default!r} is not one of its choices")


class UndeclaredKey(EtlError):
    """The code read a key that etl/config/keys.py does not declare: a bug in the ETL, not in
    the config, so not a ConfigError (exit 2)."""


KEYS: tuple[Key, ...] = (
    Key(JOB, "name", TEXT, REQUIRED, "the job's name; its state lives under <root>/<name>/ in ZooKeeper",
        connect="name"),
    Key(JOB, "max_records_per_partition", INTEGER, "1000000", "at most this many offsets of one Kafka partition per "
        "batch, so per file", connect="flush.size", spark="spark.sql.files.maxRecordsPerFile"),
    Key(JOB, "starting_offsets", CHOICE, "earliest", "where a topic the job has never read starts",
        choices=StartingOffsets, connect="consumer.auto.offset.reset", spark="startingOffsets"),
    Key(JOB, "on_offset_out_of_range", CHOICE, "fail", "a committed offset Kafka no longer holds: fail, or restart at "
        "the earliest", choices=OutOfRangePolicy, spark="failOnDataLoss"),
    Key(JOB, "max_rejected_ratio", NUMBER, "0", "a batch with a larger share of rejected records fails",
        connect="errors.tolerance"),
    Key(JOB, "decoder", CHOICE, "json", "how a message's bytes become a row", choices=DecoderKind,
        connect="value.converter"),
    Key(JOB, "avro_schema", PATH, UNSET,
        "decoder avro without framing: the .avsc file every message is one record of; not with [route] sections"),
    Key(JOB, "key_column", TEXT, UNSET, "the column that stores the Kafka key"),
    Key(JOB, "header_columns", LIST, UNSET, "Kafka record headers into columns, header:column, ..."),
    Key(JOB, "row_group_size", INTEGER, "65536", "rows per Parquet row group; bounds each task's memory"),
    Key(JOB, "compression", CHOICE, "snappy", "the Parquet files' codec; zstd needs [hive] parquet_readers = current",
        choices=Compression, connect="parquet.codec",
        spark="spark.sql.parquet.compression.codec"),
    Key(JOB, "on_dimension_change", CHOICE, "fail", "a resumed batch finds a pinned dimension changed or gone",
        choices=DimensionChangePolicy),
    Key(JOB, "transform", TEXT, UNSET, "module:function run on each decoded, enriched Arrow table",
        connect="transforms"),
    Key(JOB, "progress_seconds", NUMBER, "10", "seconds between two progress lines while a batch's tasks run"),
    Key(JOB, "records_per_task", INTEGER, "10000",
        "a range of fewer records shares a Spark task with other small ones"),

    Key(KAFKA, "topics", LIST, UNSET, "the topics to load; this or topics_regex", connect="topics", spark="subscribe"),
    Key(KAFKA, "topics_regex", TEXT, UNSET, "a pattern (RE2) matched against every topic's whole name at every plan",
        connect="topics.regex", spark="subscribePattern"),
    Key(KAFKA, "bootstrap.servers", TEXT, REQUIRED, "the brokers; handed to librdkafka as it is",
        connect="bootstrap.servers", spark="kafka.bootstrap.servers"),
    Key(KAFKA, "fetch_timeout_seconds", NUMBER, "30", "give up on a range after this long without progress",
        spark="kafkaConsumer.pollTimeoutMs"),
    Key(KAFKA, "metadata_timeout_seconds", NUMBER, "10", "one metadata request"),
    Key(KAFKA, "consumer_group", TEXT, Derived("`etl-<job name>`"), "the consumer group committed offsets are "
        "mirrored to"),
    Key(KAFKA, "commit_to_consumer_group", BOOLEAN, "true", "false: mirror the offsets to no consumer group"),
    Key(KAFKA, "sasl.password_file", PATH, UNSET, "a file holding sasl.password alone"),
    Key(KAFKA, "ssl.key.password_file", PATH, UNSET, "a file holding ssl.key.password alone"),
    Key(KAFKA, "ssl.keystore.password_file", PATH, UNSET, "a file holding ssl.keystore.password alone"),
    Key(KAFKA, "sasl.oauthbearer.client.secret_file", PATH, UNSET,
        "a file holding sasl.oauthbearer.client.secret alone"),

    Key(ZOOKEEPER, "hosts", TEXT, REQUIRED, "host:port,... of the ensemble"),
    Key(ZOOKEEPER, "root", PATH, "/etl", "every job lives under <root>/<job name>/"),
    Key(ZOOKEEPER, "session_timeout_seconds", NUMBER, "10", "a run that dies keeps its lock until this expires"),
    Key(ZOOKEEPER, "auth", CHOICE, "none", "none, or digest: znodes only digest_user can read", choices=ZooKeeperAuth),
    Key(ZOOKEEPER, "digest_user", TEXT, UNSET, "with auth = digest"),
    Key(ZOOKEEPER, "digest_password_file", PATH, UNSET, "with auth = digest: a file holding the password alone"),

    Key(WAREHOUSE, "url", URL, REQUIRED, "where the table files go: file:///path, webhdfs:// or swebhdfs://",
        connect="hdfs.url"),
    Key(WAREHOUSE, "hive_location", URL, UNSET, "how Hive names the same folder; required for WebHDFS"),
    Key(WAREHOUSE, "user", TEXT, UNSET, "WebHDFS with auth = simple: the HDFS user the job acts as"),
    Key(WAREHOUSE, "auth", CHOICE, "simple", "WebHDFS: simple or kerberos", choices=WarehouseAuth,
        connect="hdfs.authentication.kerberos"),
    Key(WAREHOUSE, "kerberos_principal", TEXT, UNSET, "WebHDFS with auth = kerberos", connect="connect.hdfs.principal"),
    Key(WAREHOUSE, "kerberos_keytab", PATH, UNSET, "WebHDFS with auth = kerberos: log in from this keytab",
        connect="connect.hdfs.keytab"),
    Key(WAREHOUSE, "timeout_seconds", NUMBER, "60", "WebHDFS: connect and read timeout of one HTTP request"),

    Key(HIVE, "metastore", URL, "embedded", "thrift://host:port of a shared metastore, or embedded",
        connect="hive.metastore.uris"),
    Key(HIVE, "metastore_client", CHOICE, Derived("`thrift` for a `thrift://` metastore, else `spark`"),
        "how the driver reads the metastore and adds partitions", choices=MetastoreClient),
    Key(HIVE, "database", TEXT, REQUIRED, "folded to lower case; bound to the job at its first run",
        connect="hive.database"),
    Key(HIVE, "table", TEXT, UNSET,
        "folded to lower case; bound to the job at its first run; not with [route] sections"),
    Key(HIVE, "schema", PATH, UNSET, "the DDL template; not with [route] sections"),
    Key(HIVE, "rejected_table", TEXT, Derived("`<table>_rejected`"), "the job's one table of rejected records"),
    Key(HIVE, "format", CHOICE, "parquet", "the files' format", choices=HiveFormat, connect="format.class"),
    Key(HIVE, "parquet_readers", CHOICE, "hive-2.3", "the oldest readers the Parquet files serve: hive-2.3 (INT96 "
        "timestamps, PLAIN or dictionary encodings) or current (Hive 4, Spark 3.5+, Trino, DuckDB: INT64 timestamps, "
        "delta encodings, zstd)", choices=ParquetReaders,
        spark="spark.sql.parquet.outputTimestampType"),
    Key(HIVE, "bloom_filter_columns", LIST, UNSET, "columns given a Parquet bloom filter in every file",
        spark="parquet.bloom.filter.enabled#<column>"),
    Key(HIVE, "sort_by", LIST, UNSET, "columns each row group is sorted by, ascending, NULLs last; a batch's file "
        "stays one file per Kafka partition-batch", spark="sortWithinPartitions"),
    Key(HIVE, "success_markers", BOOLEAN, "false", "write _SUCCESS into a partition once no more files can land there"),
    Key(HIVE, "success_marker_delay_seconds", NUMBER, "300", "wait this long after a partition's end"),
    Key(HIVE, "partition_by", TEXT, "planning_time", "planning_time, kafka_timestamp or column:<name>",
        connect="partitioner.class"),
    Key(HIVE, "partition_timezone", TEXT, "UTC", "the IANA zone whose wall clock dt and hour are", connect="timezone"),
    Key(HIVE, "on_missing_event_time", CHOICE, "reject", "a NULL event time", choices=MissingEventTime),
    Key(HIVE, "late_data", CHOICE, "write", "a row for a partition already due its _SUCCESS", choices=LateData),
    Key(HIVE, "idle_partition_seconds", NUMBER, "600", "a Kafka partition quiet this long does not hold back the "
        "watermark"),
    Key(HIVE, "max_future_seconds", NUMBER, "3600", "an event time further ahead never advances the watermark"),
    Key(HIVE, "future_data", CHOICE, "write", "a row past max_future_seconds", choices=FutureData),
    Key(HIVE, "max_open_partition_files", INTEGER, "32", "partition files one task keeps open"),
    Key(HIVE, "max_partitions_per_batch", INTEGER, UNSET, "the most Hive partitions one batch may put rows in"),
    Key(HIVE, "on_too_many_partitions", CHOICE, "fail", "a batch past max_partitions_per_batch",
        choices=PartitionCapAction),

    Key(REGISTRY, "url", URL, REQUIRED, "one or more URLs, comma-separated, tried in turn",
        connect="value.converter.schema.registry.url"),
    Key(REGISTRY, "basic.auth.user.info", TEXT, UNSET, "user:password", secret=True,
        connect="value.converter.basic.auth.user.info"),
    Key(REGISTRY, "basic.auth.user.info_file", PATH, UNSET, "a file holding basic.auth.user.info alone"),
    Key(REGISTRY, "basic.auth.credentials.source", TEXT, UNSET, "where the client takes its credentials from "
        "(USER_INFO, URL, SASL_INHERIT)", connect="value.converter.basic.auth.credentials.source"),
    Key(REGISTRY, "ssl.ca.location", PATH, UNSET, "a TLS file, present on the driver and every executor"),
    Key(REGISTRY, "ssl.certificate.location", PATH, UNSET, "a TLS file, present on the driver and every executor"),
    Key(REGISTRY, "ssl.key.location", PATH, UNSET, "a TLS file, present on the driver and every executor"),
    Key(REGISTRY, "ssl.key.password", TEXT, UNSET, "the key's password", secret=True),
    Key(REGISTRY, "ssl.key.password_file", PATH, UNSET, "a file holding ssl.key.password alone"),
    Key(REGISTRY, "proxy", URL, UNSET, "an HTTP proxy"),
    Key(REGISTRY, "timeout_seconds", NUMBER, "10", "one request; retries follow [retry]"),

    Key(DIMENSION, "source", TEXT, REQUIRED, "a Parquet or CSV file, or hive:database.table"),
    Key(DIMENSION, "join_key", TEXT, UNSET,
        "the event column looked up; without it the dimension goes to the transform"),
    Key(DIMENSION, "dimension_key", TEXT, Derived("`join_key`"), "the source's key column"),
    Key(DIMENSION, "columns", LIST, REQUIRED, "columns added to each row, each declared in the DDL"),

    Key(ROUTE, "topics", LIST, UNSET, "the topics this route loads; this or topics_regex", connect="topics"),
    Key(ROUTE, "topics_regex", TEXT, UNSET, "a pattern the topics' whole names match", connect="topics.regex"),
    Key(ROUTE, "table", TEXT, REQUIRED, "the table: a name, or a template with {topic}"),
    Key(ROUTE, "field", TEXT, UNSET, "with values: the field routes that share a topic split it by"),
    Key(ROUTE, "values", LIST, UNSET, "with field: the values this route takes, or *"),
    Key(ROUTE, "schema", PATH, REQUIRED, "the table's DDL, or registry"),
    Key(ROUTE, "decoder", CHOICE, Derived("`[job]`'s"), "how this route's records are read", choices=DecoderKind,
        connect="value.converter"),
    Key(ROUTE, "avro_schema", PATH, UNSET, "decoder avro without framing: the .avsc file"),
    Key(ROUTE, "transform", TEXT, UNSET, "module:function, as [job] transform", connect="transforms"),
    Key(ROUTE, "dimensions", LIST, UNSET, "the [dimension] sections this route joins or hands to its transform"),

    Key(ROLLUP, "table", TEXT, REQUIRED, "the rollup's table, in [hive] database"),
    Key(ROLLUP, "route", TEXT, UNSET, "with [route] sections: the route whose table's rows it reads"),
    Key(ROLLUP, "where", TEXT, UNSET, "which rows count, e.g. level = 'ERROR' (every row if unset)"),
    Key(ROLLUP, "group_by", LIST, REQUIRED, "columns, and minute(c), hour(c) or day(c) of a timestamp column"),
    Key(ROLLUP, "aggregates", LIST, REQUIRED, "count(*), count(c), sum(c), min(c), max(c), each `as <name>`"),
    Key(ROLLUP, "target", URL, UNSET, "postgresql://user@host:port/database: the rollup kept there too"),
    Key(ROLLUP, "password_file", PATH, UNSET, "with target: a file holding the database password alone"),

    Key(COMPACTION, "target_file_mb", INTEGER, "256", "merged files are about this size"),
    Key(COMPACTION, "min_files", INTEGER, "8", "a partition with fewer committed files is left alone"),
    Key(COMPACTION, "only_finished", BOOLEAN, "true", "only partitions with _SUCCESS, or whose window closed"),
    Key(COMPACTION, "keep_superseded_minutes", NUMBER, "60", "how long replaced files stay for running queries"),
    Key(COMPACTION, "after_run", BOOLEAN, "false", "compact at the end of every etl run"),

    Key(METRICS, "pushgateway", URL, UNSET, "http(s)://host:port of a Prometheus Pushgateway"),
    Key(METRICS, "textfile", PATH, UNSET, "a .prom file node_exporter's textfile collector reads"),
    Key(METRICS, "push_timeout_seconds", NUMBER, "5", "one push"),

    Key(RETRY, "attempts", INTEGER, "5", "tries in all"),
    Key(RETRY, "initial_wait_seconds", NUMBER, "0.5", "the first wait; later waits grow exponentially",
        connect="retry.backoff.ms"),
    Key(RETRY, "max_wait_seconds", NUMBER, "10", "the longest wait"),

    Key(JVM, "class_archive", BOOLEAN, "true", "map a class archive of Spark's start-up classes"),
    Key(JVM, "class_archive_dir", PATH, Derived("`$XDG_CACHE_HOME/kafka-hive-etl/jvm`, else "
                                                "`~/.cache/kafka-hive-etl/jvm`"), "where the archives are kept"),
    Key(JVM, "quick_start", BOOLEAN, "true", "the driver JVM runs C1 alone with the serial collector"),
)
_BY_SECTION: dict[SectionKind, dict[str, Key]] = {kind: {} for kind in SectionKind}
for _key in KEYS:
    if _key.name in _BY_SECTION[_key.section]:
        raise TypeError(f"[{_key.section}] {_key.name} is declared twice")
    _BY_SECTION[_key.section][_key.name] = _key


def section_kind(section: str) -> SectionKind | None:
    """The kind of the section headed [`section`]: [route a] is a ROUTE; None for one the table
    has no entries for ([spark])."""
    for kind in SectionKind:
        if section == kind.value or kind.prefix and section.startswith(kind.prefix):
            return kind
    return None


def declared(section: str, name: str) -> Key | None:
    kind = section_kind(section)
    return _BY_SECTION[kind].get(name) if kind is not None else None


def declared_key(section: str, name: str) -> Key:
    """The entry of a key the code reads; UndeclaredKey when the table lacks it."""
    key = declared(section, name)
    if key is None:
        raise UndeclaredKey(f"the ETL reads [{section}] {name}, which etl/config/keys.py does not declare; "
                            f"add its entry there")
    return key


def names_in(section: str) -> tuple[str, ...]:
    kind = section_kind(section)
    return tuple(_BY_SECTION[kind]) if kind is not None else ()


def secret_keys(kind: SectionKind) -> tuple[str, ...]:
    return tuple(key.name for key in KEYS if key.section is kind and key.secret)


def closest_name(section: str, name: str, others: tuple[str, ...] = ()) -> str | None:
    """The declared key of `section` (or of `others`, keys it passes through) a misspelt `name`
    most likely meant, if one is close."""
    close = difflib.get_close_matches(name, (*names_in(section), *others), n=1)
    return close[0] if close else None
