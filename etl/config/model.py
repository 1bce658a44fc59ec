"""The job's settings as frozen dataclasses, and every choice among named values as an enum.

The enums are the one list of the names each setting accepts: the parser (etl.config.parse)
checks a value against them and names them in its message, and the code that acts on a
setting compares with a member. They are StrEnums, so a member is equal to its string, and
prints, formats and serialises (JSON, logs) as that string.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Mapping
from urllib.parse import urlsplit

# Re-exported: the settings' types are imported from here.
from etl.config.partitioning import (  # noqa: F401
    FutureData, LateData, MissingEventTime, PartitionSource, PartitioningConfig,
)
from etl.config.topic_pattern import TopicPattern
from etl.errors import ConfigError

# Hive folds and limits names so; one rule for the config's names and the DDL's placeholders.
HIVE_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
WEBHDFS_SCHEMES = ("webhdfs", "swebhdfs")


class StartingOffsets(StrEnum):
    """[job] starting_offsets: where a topic the job never committed starts."""

    EARLIEST = "earliest"
    LATEST = "latest"


class OutOfRangePolicy(StrEnum):
    """[job] on_offset_out_of_range: what to do when Kafka no longer holds the next offsets."""

    FAIL = "fail"
    EARLIEST = "earliest"  # skip to the earliest held offset; the skipped range is recorded


class DimensionChangePolicy(StrEnum):
    """[job] on_dimension_change: a resumed batch's pinned dimension changed."""

    FAIL = "fail"
    USE_CURRENT = "use_current"


class DecoderKind(StrEnum):
    """[job] decoder: how a message value becomes a row (etl.rows.decoders maps each to its class)."""

    JSON = "json"
    ACCESS_LOG = "access_log"
    AVRO = "avro"  # Confluent-framed with [schema_registry], or unframed with [job] avro_schema
    PROTOBUF = "protobuf"  # Confluent-framed, schemas from [schema_registry]

    @property
    def reads_writer_schemas(self) -> bool:
        """Whether each message is decoded with the schema it was written with (etl.rows.decoders.writer_schemas)."""
        return self in (DecoderKind.AVRO, DecoderKind.PROTOBUF)


class Compression(StrEnum):
    """[job] compression: the Parquet codec, as pyarrow names it."""

    SNAPPY = "snappy"
    ZSTD = "zstd"
    GZIP = "gzip"
    NONE = "none"


class HiveFormat(StrEnum):
    """[hive] format: the storage format of the table's files."""

    PARQUET = "parquet"
    ORC = "orc"


class ParquetReaders(StrEnum):
    """[hive] parquet_readers: the oldest readers a table's Parquet files must serve, which bounds
    the encodings, codecs and timestamp type the writer may choose (etl.sink.layout)."""

    # Hive 2.3's own reader (parquet-mr 1.8): INT96 timestamps, PLAIN or dictionary, no zstd.
    HIVE_2_3 = "hive-2.3"
    # Hive 4, Spark 3.5 and later, Trino, DuckDB, pyarrow: INT64 timestamps and the delta and
    # DELTA_BINARY_PACKED and DELTA_BYTE_ARRAY encodings, zstd.
    CURRENT = "current"


class MetastoreClient(StrEnum):
    """[hive] metastore_client: how the driver reads the metastore and adds partitions. Tables are
    created and evolved with Spark SQL either way."""

    THRIFT = "thrift"  # a Thrift client in the driver (etl.hive.thrift_catalog): no Hive client in the JVM
    SPARK = "spark"  # Spark's Hive client, through py4j: an embedded metastore, or one behind SASL


METASTORE_SASL = "spark.hadoop.hive.metastore.sasl.enabled"  # a [spark] key: true rules THRIFT out


class DimensionKind(StrEnum):
    """Where a [dimension <name>] reads its reference data from."""

    FILE = "file"  # a local Parquet or CSV file
    HIVE = "hive"  # a Hive table, read through Spark


class DimensionFormat(StrEnum):
    """The format of a file dimension, told by its suffix."""

    PARQUET = "parquet"
    CSV = "csv"


class WarehouseAuth(StrEnum):
    """[warehouse] auth, for WebHDFS."""

    SIMPLE = "simple"  # the HDFS user is named (user.name)
    KERBEROS = "kerberos"  # SPNEGO, from kerberos_keytab or the ticket cache


class ZooKeeperAuth(StrEnum):
    """[zookeeper] auth."""

    NONE = "none"  # the job's znodes are open to anyone (ZooKeeper's default)
    DIGEST = "digest"  # every znode the job creates is readable and writable by digest_user only


@dataclass(frozen=True)
class FixedAvroSchema:
    """[job] avro_schema: messages are plain Avro (no Confluent framing) all written with this
    schema. The text travels with the config, so the file need only exist on the driver."""

    path: Path  # as resolved, named in messages
    text: str  # the schema's JSON, checked to parse as Avro when the config was read


@dataclass(frozen=True)
class SchemaRegistryConfig:
    """[schema_registry]: where Avro and Protobuf writer schemas are fetched from.

    `client` goes to confluent-kafka's SchemaRegistryClient as is (url, basic auth, TLS): an
    etl.config.schema_registry.RegistrySettings, whose repr masks the secrets."""

    client: Mapping[str, object]
    timeout_seconds: float = 10.0

    @property
    def url(self) -> str:
        return str(self.client["url"])


@dataclass(frozen=True)
class HeaderColumn:
    """One entry of [job] header_columns: the Kafka record header `header` fills the table's
    string or binary column `column` (etl.rows.headers). A repeated header gives its last value,
    as Kafka's Headers.lastHeader does; a missing one gives NULL."""

    header: str
    column: str


@dataclass(frozen=True)
class JobConfig:
    name: str
    max_records_per_partition: int = 1_000_000
    starting_offsets: StartingOffsets = StartingOffsets.EARLIEST
    on_offset_out_of_range: OutOfRangePolicy = OutOfRangePolicy.FAIL
    max_rejected_ratio: float = 0.0
    decoder: DecoderKind = DecoderKind.JSON
    key_column: str | None = None
    row_group_size: int = 65_536
    compression: Compression = Compression.SNAPPY
    on_dimension_change: DimensionChangePolicy = DimensionChangePolicy.FAIL
    transform: str | None = None  # module:function, applied to each decoded and enriched Arrow batch
    avro_schema: FixedAvroSchema | None = None  # decoder avro without framing
    header_columns: tuple[HeaderColumn, ...] = ()  # Kafka record headers copied into columns
    progress_seconds: float = 10.0  # between two progress lines while a batch's tasks run
    records_per_task: int = 10_000  # smaller ranges share a Spark task (etl.job.packing)


@dataclass(frozen=True)
class DimensionConfig:
    """One [dimension <name>] section: reference data loaded once per batch and broadcast.

    With a join_key, each record's join_key is looked up in the source's dimension_key and
    `columns` are added to the row (NULL when nothing matches). Without one, the table is only
    handed to the [job] transform, as lookups[name]."""

    name: str
    source: str  # as written in the config, for messages
    kind: DimensionKind
    path: Path | None  # kind file: the local Parquet or CSV file (None for one on the warehouse's HDFS)
    format: DimensionFormat | None  # kind file
    table: str | None  # kind hive: db.table
    join_key: str | None  # the event column; None: not joined, only handed to the transform
    dimension_key: str | None  # the source's key column (default: join_key)
    columns: tuple[str, ...]
    # kind file, on the warehouse's HDFS (source hdfs:// or webhdfs://): its absolute path there,
    # read through the warehouse's filesystem; `path` is then None
    warehouse_path: str | None = None

    @property
    def joined(self) -> bool:
        return self.join_key is not None


@dataclass(frozen=True)
class KafkaConfig:
    topics: tuple[str, ...]  # empty when topics_regex chooses the topics
    # Passed to librdkafka as is (bootstrap.servers, security.*, sasl.*); an
    # etl.config.kafka.KafkaSettings, whose repr masks the secrets.
    client: Mapping[str, str]
    # `client` without the keys librdkafka calls consumer properties, for the driver's
    # AdminClient (a producer-type handle, which warns of each such key on stderr).
    admin_client: Mapping[str, str]
    fetch_timeout_seconds: float = 30.0
    metadata_timeout_seconds: float = 10.0
    topics_regex: TopicPattern | None = None  # matched whole by RE2 at every plan (etl.source.topics)
    # The Kafka consumer group the committed offsets are mirrored to (etl.source.group_mirror),
    # etl-<job name> unless [kafka] consumer_group names another; None: not mirrored.
    consumer_group: str | None = None

    @property
    def topics_key(self) -> str:
        """The [kafka] key that chooses the job's topics, for messages."""
        return "topics" if self.topics_regex is None else "topics_regex"


@dataclass(frozen=True)
class ZooKeeperConfig:
    hosts: str
    root: str = "/etl"
    session_timeout_seconds: float = 10.0
    # With digest, the client authenticates as digest_user and owns its znodes (etl.state.acl).
    auth: ZooKeeperAuth = ZooKeeperAuth.NONE
    digest_user: str | None = None
    digest_password: str | None = field(default=None, repr=False)  # read from digest_password_file
    digest_password_file: Path | None = None  # named in messages, never the password itself


@dataclass(frozen=True)
class RetryConfig:
    attempts: int = 5
    initial_wait_seconds: float = 0.5
    max_wait_seconds: float = 10.0


@dataclass(frozen=True)
class WarehouseConfig:
    """Where the warehouse is and how to reach it; everything a Spark task needs to build its
    own filesystem client (see etl.sink.fs.filesystem_for), so it is pickled into every task."""

    url: str  # how the ETL reaches the warehouse: file:///path, webhdfs://nn:port/path, swebhdfs://...
    hive_location: str | None = None  # how Hive names the same folder, when that differs
    user: str | None = None  # WebHDFS simple auth: the HDFS user (user.name) the ETL acts as
    auth: WarehouseAuth = WarehouseAuth.SIMPLE  # WebHDFS only
    kerberos_principal: str | None = None  # WebHDFS with auth = kerberos; None: the ticket cache's default
    # WebHDFS with auth = kerberos: log in as kerberos_principal from this keytab (an absolute
    # path, present on the driver and every executor), anew whenever SPNEGO needs a ticket, so a
    # ticket's expiry never stops a long run; None: the ticket cache (kinit).
    kerberos_keytab: str | None = None
    timeout_seconds: float = 60.0  # WebHDFS: connect and read timeout of one HTTP request
    # Bounds the retries of idempotent filesystem calls. Not a [warehouse] key: load_config
    # passes the job's [retry] policy here, so the executors retry as the driver does.
    retry: RetryConfig = field(default_factory=RetryConfig)

    @property
    def scheme(self) -> str:
        return urlsplit(self.url).scheme

    @property
    def is_webhdfs(self) -> bool:
        return self.scheme in WEBHDFS_SCHEMES

    @property
    def fs_root(self) -> str:
        """The warehouse folder as a path on the warehouse filesystem."""
        return urlsplit(self.url).path or "/"

    @property
    def hive_root(self) -> str:
        return (self.hive_location or self.url).rstrip("/")

    @property
    def namenode_urls(self) -> str:
        """The HTTP(S) address(es) of the WebHDFS endpoint, ';'-separated as HdfsCLI takes them
        (webhdfs://nn1:9870,nn2:9870/path names both NameNodes of an HA pair)."""
        http = "https" if self.scheme == "swebhdfs" else "http"
        return ";".join(f"{http}://{address}" for address in urlsplit(self.url).netloc.split(","))


@dataclass(frozen=True)
class SuccessMarkerConfig:
    """[hive] success_markers, success_marker_delay_seconds: write `_SUCCESS` into a Hive
    partition's folder once its time window has closed, plus the delay, and every batch that
    touched it is COMMITTED (etl.sink.markers)."""

    enabled: bool = False
    # After the window's end by the driver's clock; covers the clock skew between the hosts
    # that may run the job (a batch is partitioned by the clock of the host that plans it).
    delay_seconds: float = 300.0


class PartitionCapAction(StrEnum):
    """[hive] on_too_many_partitions: a batch whose rows fall in more partitions than
    max_partitions_per_batch."""

    FAIL = "fail"  # the batch is refused before any file is written: exit 1, nothing committed
    REJECT = "reject"  # rows of the partitions past the cap (the latest ones) to <table>_rejected


@dataclass(frozen=True)
class HiveConfig:
    metastore: str  # "embedded" or thrift://host:port
    database: str
    # The job's one table and its DDL; None with [route] sections, each of which names its own
    # (Config.routes). Code that acts on one table is handed a view (Config.for_table).
    table: str | None
    schema_file: Path | None
    rejected_table: str  # [hive] rejected_table; <table>_rejected unless set
    format: HiveFormat = HiveFormat.PARQUET
    parquet_readers: ParquetReaders = ParquetReaders.HIVE_2_3
    bloom_filter_columns: tuple[str, ...] = ()  # a Parquet bloom filter each, in every file
    sort_by: tuple[str, ...] = ()  # each row group sorted by these columns, ascending, NULLs last
    success_markers: SuccessMarkerConfig = field(default_factory=SuccessMarkerConfig)
    partitioning: PartitioningConfig = field(default_factory=PartitioningConfig)
    # By event time: a batch whose rows fall in more Hive partitions than this is refused before any
    # file is written, or its rows past the cap rejected (etl.job.partition_cap); None: no cap.
    max_partitions_per_batch: int | None = None
    on_too_many_partitions: PartitionCapAction = PartitionCapAction.FAIL
    metastore_client: MetastoreClient = MetastoreClient.SPARK  # parsed: THRIFT for a thrift:// metastore
    metastore_timeout_seconds: float = 60.0  # one Thrift call's bound (etl.config.metastore)

    @property
    def the_table(self) -> str:
        """The table of a one-table job, or of a view (Config.for_table)."""
        if self.table is None:
            raise ConfigError("[route] sections name the tables: this step acts on one table, and was handed the "
                              "job's config instead of one table's view (a bug)")
        return self.table

    @property
    def the_schema_file(self) -> Path:
        if self.schema_file is None:
            raise ConfigError(f"table {self.table}'s columns come from the Schema Registry, not a DDL file; this "
                              f"step needs the DDL (a bug, or a command that does not take registry tables yet)")
        return self.schema_file
