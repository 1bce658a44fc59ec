"""The job's INI config, parsed and validated once into frozen dataclasses.

Nothing below this module reads the config file or the environment for settings: the typed
objects are passed down. Every ConfigError names the section and key at fault.
"""
from __future__ import annotations

import configparser
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping
from urllib.parse import urlsplit

from etl.errors import ConfigError

STARTING_OFFSETS = ("earliest", "latest")
OUT_OF_RANGE_POLICIES = ("fail", "earliest")
DECODERS = ("json", "access_log")
COMPRESSIONS = ("snappy", "zstd", "gzip", "none")
JOB_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
HIVE_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
TOPIC_RE = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
# Settings the ETL owns; a pass-through value for them would break offset control.
KAFKA_RESERVED = ("enable.auto.commit", "group.id", "auto.offset.reset", "enable.partition.eof")


@dataclass(frozen=True)
class JobConfig:
    name: str
    max_records_per_partition: int = 1_000_000
    starting_offsets: str = "earliest"
    on_offset_out_of_range: str = "fail"
    max_rejected_ratio: float = 0.0
    decoder: str = "json"
    key_column: str | None = None
    row_group_size: int = 65_536
    compression: str = "snappy"


@dataclass(frozen=True)
class KafkaConfig:
    topics: tuple[str, ...]
    client: Mapping[str, str]  # passed to librdkafka as is (bootstrap.servers, security.*, sasl.*)
    fetch_timeout_seconds: float = 30.0
    metadata_timeout_seconds: float = 10.0


@dataclass(frozen=True)
class ZooKeeperConfig:
    hosts: str
    root: str = "/etl"
    session_timeout_seconds: float = 10.0


@dataclass(frozen=True)
class WarehouseConfig:
    url: str  # how the ETL reaches the warehouse
    hive_location: str | None = None  # how Hive names the same folder, when that differs

    @property
    def fs_root(self) -> str:
        """The warehouse folder as a path on the warehouse filesystem."""
        return urlsplit(self.url).path or "/"

    @property
    def hive_root(self) -> str:
        return (self.hive_location or self.url).rstrip("/")


@dataclass(frozen=True)
class HiveConfig:
    metastore: str  # "embedded" or thrift://host:port
    database: str
    table: str
    schema_file: Path
    format: str = "parquet"

    @property
    def rejected_table(self) -> str:
        return f"{self.table}_rejected"


@dataclass(frozen=True)
class RetryConfig:
    attempts: int = 5
    initial_wait_seconds: float = 0.5
    max_wait_seconds: float = 10.0


@dataclass(frozen=True)
class Config:
    path: Path
    job: JobConfig
    kafka: KafkaConfig
    zookeeper: ZooKeeperConfig
    warehouse: WarehouseConfig
    hive: HiveConfig
    retry: RetryConfig = field(default_factory=RetryConfig)
    spark: Mapping[str, str] = field(default_factory=dict)


def load_config(path: str | os.PathLike) -> Config:
    """Read and validate the INI file at `path`; raise ConfigError naming the bad key."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist; pass --config with the job's INI file")
    parser = configparser.ConfigParser(interpolation=None, delimiters=("=",))
    parser.optionxform = str  # keep Kafka and Spark keys' case
    try:
        parser.read(path, encoding="utf-8")
    except configparser.Error as exc:
        raise ConfigError(f"{path}: cannot parse: {exc}") from exc
    return parse_config(parser, path)


def parse_config(parser: configparser.ConfigParser, path: Path) -> Config:
    known = {"job", "kafka", "zookeeper", "warehouse", "hive", "retry", "spark"}
    for section in parser.sections():
        if section not in known:
            raise ConfigError(f"{path}: unknown section [{section}]; known sections: {sorted(known)}")
    return Config(
        path=path,
        job=_job(_Section(parser, "job", path)),
        kafka=_kafka(_Section(parser, "kafka", path)),
        zookeeper=_zookeeper(_Section(parser, "zookeeper", path)),
        warehouse=_warehouse(_Section(parser, "warehouse", path)),
        hive=_hive(_Section(parser, "hive", path)),
        retry=_retry(_Section(parser, "retry", path, required=False)),
        spark=dict(parser["spark"]) if parser.has_section("spark") else {},
    )


class _Section:
    """Typed, key-checked access to one INI section; remembers which keys were read."""

    def __init__(self, parser, name: str, path: Path, required: bool = True):
        if required and not parser.has_section(name):
            raise ConfigError(f"{path}: section [{name}] is missing")
        self.name, self.path = name, path
        self.values = dict(parser[name]) if parser.has_section(name) else {}
        self.read: set[str] = set()

    def fail(self, key: str, why: str) -> ConfigError:
        return ConfigError(f"{self.path}: [{self.name}] {key}: {why}")

    def get(self, key: str, default=None, convert: Callable = str, required: bool = False):
        self.read.add(key)
        raw = self.values.get(key, "").strip()
        if not raw:
            if required:
                raise self.fail(key, "is required")
            return default
        try:
            return convert(raw)
        except (ValueError, TypeError) as exc:
            raise self.fail(key, f"{raw!r} is not valid: {exc}") from exc

    def choice(self, key: str, choices: tuple[str, ...], default: str) -> str:
        value = self.get(key, default)
        if value not in choices:
            raise self.fail(key, f"{value!r} is not one of {', '.join(choices)}")
        return value

    def positive(self, key: str, default, convert=int):
        value = self.get(key, default, convert)
        if value <= 0:
            raise self.fail(key, f"must be greater than 0, got {value}")
        return value

    def reject_unknown(self) -> None:
        unknown = sorted(set(self.values) - self.read)
        if unknown:
            raise self.fail(unknown[0], f"unknown key; known keys in [{self.name}]: {sorted(self.read)}")


def _matching(regex: re.Pattern, what: str) -> Callable[[str], str]:
    def convert(raw: str) -> str:
        if not regex.match(raw):
            raise ValueError(f"not a valid {what}")
        return raw
    return convert


def _ratio(raw: str) -> float:
    value = float(raw)
    if not 0.0 <= value <= 1.0:
        raise ValueError("must be between 0 and 1")
    return value


def _job(s: _Section) -> JobConfig:
    job = JobConfig(
        name=s.get("name", convert=_matching(JOB_NAME_RE, "job name"), required=True),
        max_records_per_partition=s.positive("max_records_per_partition", 1_000_000),
        starting_offsets=s.choice("starting_offsets", STARTING_OFFSETS, "earliest"),
        on_offset_out_of_range=s.choice("on_offset_out_of_range", OUT_OF_RANGE_POLICIES, "fail"),
        max_rejected_ratio=s.get("max_rejected_ratio", 0.0, _ratio),
        decoder=s.choice("decoder", DECODERS, "json"),
        key_column=s.get("key_column", None, _matching(HIVE_NAME_RE, "column name")),
        row_group_size=s.positive("row_group_size", 65_536),
        compression=s.choice("compression", COMPRESSIONS, "snappy"),
    )
    s.reject_unknown()
    return job


def _topics(raw: str) -> tuple[str, ...]:
    topics = tuple(t.strip() for t in raw.split(",") if t.strip())
    for topic in topics:
        if not TOPIC_RE.match(topic):
            raise ValueError(f"{topic!r} is not a valid Kafka topic name")
    if len(set(topics)) != len(topics):
        raise ValueError("a topic is listed twice")
    return topics


def _kafka(s: _Section) -> KafkaConfig:
    own = {"topics", "fetch_timeout_seconds", "metadata_timeout_seconds"}
    client = {k: v for k, v in s.values.items() if k not in own}
    if "bootstrap.servers" not in client:
        raise s.fail("bootstrap.servers", "is required")
    for key in KAFKA_RESERVED:
        if key in client:
            raise s.fail(key, "is set by the ETL itself (offsets live in ZooKeeper); remove it")
    return KafkaConfig(
        topics=s.get("topics", convert=_topics, required=True),
        client=client,
        fetch_timeout_seconds=s.positive("fetch_timeout_seconds", 30.0, float),
        metadata_timeout_seconds=s.positive("metadata_timeout_seconds", 10.0, float),
    )


def _zk_root(raw: str) -> str:
    if not raw.startswith("/") or raw.endswith("/") and raw != "/" or "//" in raw:
        raise ValueError("must be an absolute znode path like /etl")
    return raw.rstrip("/") or "/"


def _zookeeper(s: _Section) -> ZooKeeperConfig:
    zk = ZooKeeperConfig(
        hosts=s.get("hosts", required=True),
        root=s.get("root", "/etl", _zk_root),
        session_timeout_seconds=s.positive("session_timeout_seconds", 10.0, float),
    )
    s.reject_unknown()
    return zk


def _warehouse_url(raw: str) -> str:
    if not raw.startswith("file:///"):
        raise ValueError("only file:///absolute/path is supported in this version")
    return raw.rstrip("/")


def _warehouse(s: _Section) -> WarehouseConfig:
    warehouse = WarehouseConfig(url=s.get("url", convert=_warehouse_url, required=True),
                                hive_location=s.get("hive_location", None, _warehouse_url))
    s.reject_unknown()
    return warehouse


def _metastore(raw: str) -> str:
    if raw != "embedded" and not re.match(r"^thrift://[^:/]+:\d+$", raw):
        raise ValueError("must be 'embedded' or thrift://host:port")
    return raw


def _hive(s: _Section) -> HiveConfig:
    base = s.path.parent
    schema = s.get("schema", convert=lambda raw: _resolve(base, raw), required=True)
    if not schema.is_file():
        raise s.fail("schema", f"file {schema} does not exist")
    hive = HiveConfig(
        metastore=s.get("metastore", "embedded", _metastore),
        database=s.get("database", convert=_matching(HIVE_NAME_RE, "Hive database name"), required=True),
        table=s.get("table", convert=_matching(HIVE_NAME_RE, "Hive table name"), required=True),
        schema_file=schema,
        format=s.choice("format", ("parquet",), "parquet"),
    )
    s.reject_unknown()
    return hive


def _resolve(base: Path, raw: str) -> Path:
    """A relative schema path is tried against the config's folder, then the working dir."""
    candidate = Path(raw)
    if candidate.is_absolute():
        return candidate
    beside = (base / candidate).resolve()
    return beside if beside.exists() else candidate.resolve()


def _retry(s: _Section) -> RetryConfig:
    retry = RetryConfig(
        attempts=s.positive("attempts", 5),
        initial_wait_seconds=s.positive("initial_wait_seconds", 0.5, float),
        max_wait_seconds=s.positive("max_wait_seconds", 10.0, float),
    )
    s.reject_unknown()
    return retry
