"""The job's INI config, parsed and validated once into frozen dataclasses.

Nothing below this module reads the config file or the environment for settings: the typed
objects are passed down. Every ConfigError names the section and key at fault.
"""
from __future__ import annotations

import configparser
import getpass
import math
import os
import posixpath
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Mapping
from urllib.parse import urlsplit

from etl.errors import ConfigError

STARTING_OFFSETS = ("earliest", "latest")
OUT_OF_RANGE_POLICIES = ("fail", "earliest")
DECODERS = ("json", "access_log")
COMPRESSIONS = ("snappy", "zstd", "gzip", "none")
DIMENSION_CHANGE_POLICIES = ("fail", "use_current")
DIMENSION_SECTION = "dimension "  # [dimension <name>]: one reference-data source each
DIMENSION_FORMATS = {".parquet": "parquet", ".parq": "parquet", ".csv": "csv"}
TRANSFORM_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$")
HIVE_TABLE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}\.[A-Za-z_][A-Za-z0-9_]{0,127}$")
WEBHDFS_SCHEMES = ("webhdfs", "swebhdfs")
WAREHOUSE_AUTHS = ("simple", "kerberos")
WEBHDFS_ONLY_KEYS = ("user", "auth", "kerberos_principal", "timeout_seconds")
JOB_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
HIVE_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
TOPIC_RE = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
HIDDEN_FILE_PREFIXES = ("_", ".")
# Settings the ETL owns; a pass-through value for them would break offset control.
KAFKA_RESERVED = ("enable.auto.commit", "group.id", "auto.offset.reset", "enable.partition.eof")
# spark.authenticate.secret, spark.ssl.keyPassword, spark.hadoop.fs.s3a.secret.key ...
_SPARK_SECRET_RE = re.compile(r"(^|\.)secret(\.|$)|password[^.]*$|secret$", re.I)
# librdkafka settings that are secrets. Each may be read instead from the file named by
# `<key>_file`, an ETL key (librdkafka has no such keys), so that the INI need not hold it.
KAFKA_SECRET_KEYS = ("sasl.password", "ssl.key.password", "ssl.keystore.password", "sasl.oauthbearer.client.secret")
KAFKA_OWN_KEYS = ("topics", "fetch_timeout_seconds", "metadata_timeout_seconds",
                  *(f"{key}_file" for key in KAFKA_SECRET_KEYS))
ZOOKEEPER_AUTHS = ("none", "digest")
ZOOKEEPER_ONLY_DIGEST_KEYS = ("digest_user", "digest_password_file")


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
    on_dimension_change: str = "fail"  # a resumed batch's pinned dimension changed: fail | use_current
    transform: str | None = None  # module:function, applied to each decoded and enriched Arrow batch


@dataclass(frozen=True)
class DimensionConfig:
    """One [dimension <name>] section: reference data loaded once per batch and broadcast.

    With a join_key, each record's join_key is looked up in the source's dimension_key and
    `columns` are added to the row (NULL when nothing matches). Without one, the table is only
    handed to the [job] transform, as lookups[name]."""

    name: str
    source: str  # as written in the config, for messages
    kind: str  # "file" | "hive"
    path: Path | None  # kind file: the local Parquet or CSV file
    format: str | None  # kind file: parquet | csv
    table: str | None  # kind hive: db.table
    join_key: str | None  # the event column; None: not joined, only handed to the transform
    dimension_key: str | None  # the source's key column (default: join_key)
    columns: tuple[str, ...]

    @property
    def joined(self) -> bool:
        return self.join_key is not None


class KafkaSettings(dict):
    """librdkafka settings, as librdkafka takes them. The repr masks the secrets, because the
    config travels inside every Spark task and may end up in a log line or a traceback."""

    def __repr__(self) -> str:
        return repr({key: "***" if key in KAFKA_SECRET_KEYS else value for key, value in self.items()})


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
    # none: the job's znodes are open to anyone (ZooKeeper's default). digest: the client
    # authenticates as digest_user, and every znode the job creates is readable and writable
    # by that user only (etl.state.acl).
    auth: str = "none"
    digest_user: str | None = None
    digest_password: str | None = field(default=None, repr=False)  # read from digest_password_file
    digest_password_file: Path | None = None  # named in messages, never the password itself


@dataclass(frozen=True)
class WarehouseConfig:
    """Where the warehouse is and how to reach it; everything a Spark task needs to build its
    own filesystem client (see etl.sink.fs.filesystem_for), so it is pickled into every task."""

    url: str  # how the ETL reaches the warehouse: file:///path, webhdfs://nn:port/path, swebhdfs://...
    hive_location: str | None = None  # how Hive names the same folder, when that differs
    user: str | None = None  # WebHDFS simple auth: the HDFS user (user.name) the ETL acts as
    auth: str = "simple"  # WebHDFS: simple | kerberos
    kerberos_principal: str | None = None  # WebHDFS with auth = kerberos; None: the ticket cache's default
    timeout_seconds: float = 60.0  # WebHDFS: connect and read timeout of one HTTP request
    # Bounds the retries of idempotent filesystem calls. Not a [warehouse] key: load_config
    # passes the job's [retry] policy here, so the executors retry as the driver does.
    retry: "RetryConfig" = field(default_factory=lambda: RetryConfig())

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


@dataclass(frozen=True)
class HiveConfig:
    metastore: str  # "embedded" or thrift://host:port
    database: str
    table: str
    schema_file: Path
    format: str = "parquet"
    success_markers: SuccessMarkerConfig = field(default_factory=SuccessMarkerConfig)

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
    dimensions: tuple[DimensionConfig, ...] = ()


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
        if section not in known and not section.startswith(DIMENSION_SECTION):
            raise ConfigError(f"{path}: unknown section [{section}]; known sections: {sorted(known)} "
                              f"and [dimension <name>]")
    job = _job(_Section(parser, "job", path))
    retry = _retry(_Section(parser, "retry", path, required=False))
    return Config(
        path=path,
        job=job,
        kafka=_kafka(_Section(parser, "kafka", path)),
        zookeeper=_zookeeper(_Section(parser, "zookeeper", path)),
        warehouse=replace(_warehouse(_Section(parser, "warehouse", path)), retry=retry),
        hive=_hive(_Section(parser, "hive", path)),
        retry=retry,
        spark=_spark(_Section(parser, "spark", path, required=False)),
        dimensions=_dimensions(parser, path, job),
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
        if not math.isfinite(value) or value <= 0:  # nan <= 0 is False: nan would pass a plain check
            raise self.fail(key, f"must be greater than 0 (and finite), got {value}")
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


def _hive_name(what: str) -> Callable[[str], str]:
    matching = _matching(HIVE_NAME_RE, what)
    return lambda raw: matching(raw).lower()


def _plain_location(raw: str) -> None:
    """Locations reach SQL (CREATE DATABASE ... LOCATION, ADD PARTITION ... LOCATION) as
    literals: refused here, before any statement runs, rather than trusted to quoting alone."""
    bad = sorted({c for c in raw if c in "'\\\"`" or ord(c) < 32 or ord(c) == 127})
    if bad:
        raise ValueError(f"must not contain {', '.join(repr(c) for c in bad)}: a location is written into Hive "
                         "statements; percent-encode such characters or choose another folder")


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
        on_dimension_change=s.choice("on_dimension_change", DIMENSION_CHANGE_POLICIES, "fail"),
        transform=s.get("transform", None, _matching(TRANSFORM_RE, "module:function reference, e.g. "
                                                                   "etl.examples:minute_and_country")),
    )
    s.reject_unknown()
    return job


def _topics(raw: str) -> tuple[str, ...]:
    topics = tuple(t.strip() for t in raw.split(",") if t.strip())
    for topic in topics:
        if not TOPIC_RE.match(topic):
            raise ValueError(f"{topic!r} is not a valid Kafka topic name")
        if topic[0] in HIDDEN_FILE_PREFIXES:
            raise ValueError(f"topic {topic!r} starts with {topic[0]!r}: its files are named after it, and Hive "
                             f"and Spark skip files whose names start with '_' or '.', so its rows would never "
                             f"be seen; this ETL cannot load such a topic")
    if not topics:
        raise ValueError("names no topic; list one or more, separated by commas")
    if len(set(topics)) != len(topics):
        raise ValueError("a topic is listed twice")
    return topics


def _kafka(s: _Section) -> KafkaConfig:
    client = KafkaSettings({k: v for k, v in s.values.items() if k not in KAFKA_OWN_KEYS})
    if "bootstrap.servers" not in client:
        raise s.fail("bootstrap.servers", "is required")
    for key in KAFKA_RESERVED:
        if key in client:
            raise s.fail(key, "is set by the ETL itself (offsets live in ZooKeeper); remove it")
    for key in KAFKA_SECRET_KEYS:
        secret = _secret_file(s, f"{key}_file")
        if secret is not None and key in client:
            raise s.fail(f"{key}_file", f"set either {key} or {key}_file, not both")
        if secret is not None:
            client[key] = secret
    _check_with_librdkafka(s, client)
    return KafkaConfig(
        topics=s.get("topics", convert=_topics, required=True),
        client=client,
        fetch_timeout_seconds=s.positive("fetch_timeout_seconds", 30.0, float),
        metadata_timeout_seconds=s.positive("metadata_timeout_seconds", 10.0, float),
    )


def _secret_file(s: _Section, key: str) -> str | None:
    """The secret held by the file that `key` names (relative to the config's folder), or None
    when the key is not set. The file holds the secret alone; a trailing line break is dropped."""
    path = s.get(key, None, lambda raw: _resolve(s.path.parent, raw))
    if path is None:
        return None
    try:
        secret = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise s.fail(key, f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from exc
    secret = secret.removesuffix("\n").removesuffix("\r")
    if not secret or "\n" in secret:
        raise s.fail(key, f"{path} must hold the secret alone, on one line")
    return secret


def _check_with_librdkafka(s: _Section, client: Mapping[str, str]) -> None:
    """Let librdkafka judge its own settings at start-up, so that a typo or a bad value exits 2
    naming the key. It alone knows its hundreds of keys and their ranges, and building a client
    is the way to ask it; without bootstrap.servers that client never connects anywhere."""
    from confluent_kafka import Consumer, KafkaException
    settings = {key: value for key, value in client.items() if key != "bootstrap.servers"}
    try:
        Consumer({**settings, "group.id": "etl-config-check", "log_level": 0}).close()
    except KafkaException as exc:
        raise _librdkafka_refused(s, client, exc.args[0].str()) from exc


def _librdkafka_refused(s: _Section, client: Mapping[str, str], reason: str) -> ConfigError:
    reason = reason.removeprefix("Failed to create consumer: ").strip()
    for key in KAFKA_SECRET_KEYS:
        if client.get(key):
            reason = reason.replace(client[key], "***")
    key = _named_key(reason, client)
    if reason.startswith("No such configuration property"):
        reason += f"; the keys the ETL reads itself are {', '.join(KAFKA_OWN_KEYS)}, and every other key goes to librdkafka"
    if key is None:
        return ConfigError(f"{s.path}: [{s.name}]: librdkafka refuses these settings: {reason}")
    if key.endswith(".location") and not os.path.exists(client[key]):  # OpenSSL would only say "BIO lib"
        reason = f"{client[key]} does not exist ({reason})"
    return s.fail(key, f"librdkafka refuses it: {reason}")


def _named_key(reason: str, client: Mapping[str, str]) -> str | None:
    """The configured key a librdkafka message is about: one it quotes, else the first it names."""
    quoted = [key for key in re.findall(r'"([^"]+)"', reason) if key in client]
    if quoted:
        return quoted[0]
    found = [(match.start(), key) for key in client
             for match in [re.search(rf"(?<![\w.]){re.escape(key)}(?![\w.])", reason)] if match]
    return min(found)[1] if found else None


def _spark(s: _Section) -> dict[str, str]:
    """The [spark] settings, as Spark takes them. PySpark passes each one on its JVM's command
    line, where `ps` shows it to every user of the machine: secrets are refused here."""
    for key in s.values:
        if _SPARK_SECRET_RE.search(key) and not key.endswith(".file"):
            instead = ("set spark.authenticate.secret.file to a file only the job's user can read"
                       if key == "spark.authenticate.secret" else
                       "set it in spark-defaults.conf (in SPARK_CONF_DIR), readable only by the job's user")
            raise s.fail(key, f"is a secret, and Spark would show it in `ps` (every [spark] setting is on its "
                              f"JVM's command line); {instead}")
    return dict(s.values)


def _zk_root(raw: str) -> str:
    if not raw.startswith("/") or raw.endswith("/") and raw != "/" or "//" in raw:
        raise ValueError("must be an absolute znode path like /etl")
    if any(part in (".", "..") for part in raw.split("/")) or "\0" in raw:
        raise ValueError("ZooKeeper paths have no '.' or '..' components; write the absolute path, like /etl")
    return raw.rstrip("/") or "/"


def _zookeeper(s: _Section) -> ZooKeeperConfig:
    zk = ZooKeeperConfig(
        hosts=s.get("hosts", required=True),
        root=s.get("root", "/etl", _zk_root),
        session_timeout_seconds=s.positive("session_timeout_seconds", 10.0, float),
        **_zookeeper_auth(s),
    )
    s.reject_unknown()
    return zk


def _zookeeper_auth(s: _Section) -> dict:
    auth = s.choice("auth", ZOOKEEPER_AUTHS, "none")
    if auth == "none":
        for key in ZOOKEEPER_ONLY_DIGEST_KEYS:
            if s.get(key) is not None:
                raise s.fail(key, "applies only to auth = digest; set auth = digest, or remove it")
        return {"auth": auth}
    user = s.get("digest_user", convert=_digest_user, required=True)
    password_file = s.get("digest_password_file", None, lambda raw: _resolve(s.path.parent, raw))
    if password_file is None:
        raise s.fail("digest_password_file", "is required with auth = digest: name a file that holds "
                                             "the password alone (the INI holds no password)")
    return {"auth": auth, "digest_user": user, "digest_password": _secret_file(s, "digest_password_file"),
            "digest_password_file": password_file}


def _digest_user(raw: str) -> str:
    if ":" in raw or any(c.isspace() for c in raw):
        raise ValueError("a digest user name has no ':' and no spaces (ZooKeeper reads user:password)")
    return raw


def _warehouse_url(raw: str) -> str:
    _plain_location(raw)
    url = raw.rstrip("/")
    parts = urlsplit(url)
    if parts.scheme == "file":
        if not raw.startswith("file:///"):
            raise ValueError("write a local warehouse as file:///absolute/path")
    elif parts.scheme in WEBHDFS_SCHEMES:
        _webhdfs_address(parts)
    else:
        raise ValueError("use file:///absolute/path, webhdfs://namenode:port/absolute/path, "
                         "or swebhdfs://namenode:port/absolute/path for WebHDFS over TLS")
    if parts.query or parts.fragment:
        raise ValueError("must not have a query (?...) or fragment (#...)")
    return url


def _webhdfs_address(parts) -> None:
    example = f"{parts.scheme}://namenode:port/absolute/path"
    for address in parts.netloc.split(","):
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit() or "@" in address:
            raise ValueError(f"{address or 'the address'!r} is not host:port; write {example} (two NameNodes "
                             f"of an HA pair as {parts.scheme}://nn1:port,nn2:port/absolute/path)")
    path = parts.path or "/"
    if posixpath.normpath(path) != path:
        raise ValueError(f"the path {path!r} is not a normalized absolute path; write {example}")


def _hive_location(raw: str) -> str:
    _plain_location(raw)
    parts = urlsplit(raw)
    if not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*$", parts.scheme) or not raw.startswith(f"{parts.scheme}://"):
        raise ValueError("must be a URI such as hdfs://nameservice1/warehouse or file:///absolute/path")
    if not parts.path.startswith("/") or (parts.scheme == "file" and not raw.startswith("file:///")):
        raise ValueError("must name an absolute folder, e.g. hdfs://nameservice1/warehouse or file:///absolute/path")
    if parts.query or parts.fragment:
        raise ValueError("must not have a query (?...) or fragment (#...)")
    return raw.rstrip("/")


def _warehouse(s: _Section) -> WarehouseConfig:
    url = s.get("url", convert=_warehouse_url, required=True)
    hive_location = s.get("hive_location", None, _hive_location)
    if urlsplit(url).scheme not in WEBHDFS_SCHEMES:
        for key in WEBHDFS_ONLY_KEYS:
            if s.get(key) is not None:
                raise s.fail(key, "applies only to a webhdfs:// or swebhdfs:// url; remove it")
        warehouse = WarehouseConfig(url=url, hive_location=hive_location)
    else:
        warehouse = _webhdfs_warehouse(s, url, hive_location)
    s.reject_unknown()
    return warehouse


def _webhdfs_warehouse(s: _Section, url: str, hive_location: str | None) -> WarehouseConfig:
    if hive_location is None:
        raise s.fail("hive_location", f"is required when url is {urlsplit(url).scheme}://: set it to the URI "
                                      "Hive uses for the same folder, e.g. hdfs://nameservice1/warehouse")
    auth = s.choice("auth", WAREHOUSE_AUTHS, "simple")
    user, principal = s.get("user"), s.get("kerberos_principal")
    if auth == "kerberos" and user is not None:
        raise s.fail("user", "is for auth = simple; with auth = kerberos the Kerberos principal is the HDFS "
                             "user (set kerberos_principal to choose one)")
    if auth == "simple" and principal is not None:
        raise s.fail("kerberos_principal", "needs auth = kerberos")
    if auth == "simple" and user is None:
        user = _current_user()  # decided once, here: the executors then act as the same HDFS user
    return WarehouseConfig(url=url, hive_location=hive_location, user=user, auth=auth,
                           kerberos_principal=principal,
                           timeout_seconds=s.positive("timeout_seconds", 60.0, float))


def _current_user() -> str | None:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (some containers): HdfsCLI asks again, per process
        return None


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
        # Hive folds names to lower case, so Events and events are one table: folded here, so that
        # they also name one folder and one binding.
        database=s.get("database", convert=_hive_name("Hive database name"), required=True),
        table=s.get("table", convert=_hive_name("Hive table name"), required=True),
        schema_file=schema,
        format=s.choice("format", ("parquet",), "parquet"),
        success_markers=_success_markers(s),
    )
    s.reject_unknown()
    return hive


def _success_markers(s: _Section) -> SuccessMarkerConfig:
    return SuccessMarkerConfig(
        enabled=s.get("success_markers", False, _boolean),
        delay_seconds=s.get("success_marker_delay_seconds", 300.0, _non_negative_seconds),
    )


def _boolean(raw: str) -> bool:
    value = configparser.ConfigParser.BOOLEAN_STATES.get(raw.lower())
    if value is None:
        raise ValueError("write true or false")
    return value


def _non_negative_seconds(raw: str) -> float:
    value = float(raw)
    if not math.isfinite(value) or value < 0:
        raise ValueError("must be a number of seconds, 0 or more")
    return value


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


def _dimensions(parser, path: Path, job: JobConfig) -> tuple[DimensionConfig, ...]:
    names = [section for section in parser.sections() if section.startswith(DIMENSION_SECTION)]
    dimensions = tuple(_dimension(_Section(parser, section, path), job) for section in names)
    _check_enriched_once(dimensions, path)
    return dimensions


def _dimension(s: _Section, job: JobConfig) -> DimensionConfig:
    name = s.name[len(DIMENSION_SECTION):].strip()
    if not HIVE_NAME_RE.match(name):
        raise ConfigError(f"{s.path}: [{s.name}]: {name!r} is not a valid dimension name; "
                          f"write [dimension <name>] with letters, digits and _")
    column = _matching(HIVE_NAME_RE, "column name")
    source = s.get("source", required=True)
    join_key = s.get("join_key", None, column)
    dimension_key = s.get("dimension_key", None, column)
    columns = s.get("columns", convert=_column_list, required=True)
    if join_key is None:
        _check_transform_only(s, job, dimension_key)
    dimension_key = dimension_key or join_key
    if dimension_key in columns:
        raise s.fail("columns", f"lists the key {dimension_key!r}; the row already holds it in {join_key!r}")
    kind, where, file_format = _dimension_source(s, source)
    dimension = DimensionConfig(name=name, source=source, kind=kind, path=where if kind == "file" else None,
                                format=file_format, table=where if kind == "hive" else None, join_key=join_key,
                                dimension_key=dimension_key, columns=columns)
    s.reject_unknown()
    return dimension


def _check_transform_only(s: _Section, job: JobConfig, dimension_key: str | None) -> None:
    if dimension_key is not None:
        raise s.fail("dimension_key", "needs join_key (the event column to look up)")
    if job.transform is None:
        raise s.fail("join_key", "is required: without it the dimension is only handed to [job] transform, "
                                 "which is not set")


def _column_list(raw: str) -> tuple[str, ...]:
    columns = tuple(c.strip() for c in raw.split(",") if c.strip())
    for name in columns:
        if not HIVE_NAME_RE.match(name):
            raise ValueError(f"{name!r} is not a column name")
    if not columns or len({c.lower() for c in columns}) != len(columns):
        raise ValueError("list each column once, comma-separated")
    return columns


def _dimension_source(s: _Section, raw: str) -> tuple[str, object, str | None]:
    """('hive', 'db.table', None) or ('file', Path, 'parquet' | 'csv')."""
    if raw.startswith("hive:"):
        table = raw[len("hive:"):]
        if not HIVE_TABLE_RE.match(table):
            raise s.fail("source", f"{raw!r}: write a Hive table as hive:database.table")
        return "hive", table, None
    if raw.startswith("file:") and not raw.startswith("file:///"):
        raise s.fail("source", f"{raw!r}: write a file URL as file:///absolute/path")
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]+:", raw) and not raw.startswith("file:"):
        raise s.fail("source", f"{raw!r}: use a Parquet (.parquet) or CSV (.csv) file, as file:///absolute/path or "
                               f"a path relative to the config's folder, or hive:database.table")
    where = Path(raw[len("file://"):]) if raw.startswith("file://") else _resolve(s.path.parent, raw)
    file_format = DIMENSION_FORMATS.get(where.suffix.lower())
    if file_format is None:
        raise s.fail("source", f"{raw!r}: name a Parquet (.parquet) or CSV (.csv) file, or hive:database.table")
    return "file", where, file_format


def _check_enriched_once(dimensions: tuple[DimensionConfig, ...], path: Path) -> None:
    filled_by: dict[str, str] = {}
    for dimension in dimensions:
        for column in (dimension.columns if dimension.joined else ()):
            if column.lower() in filled_by:
                raise ConfigError(f"{path}: [dimension {dimension.name}] columns: {column!r} is already added by "
                                  f"[dimension {filled_by[column.lower()]}]; a column is filled by one dimension")
            filled_by[column.lower()] = dimension.name
