"""Reading the job's INI file into a Config: the file, the list of sections, and the sections
small enough to live here ([job], [zookeeper], [hive], [retry], [spark]). The larger ones have
their own modules: etl.config.kafka, etl.config.warehouse, etl.config.dimensions."""
from __future__ import annotations

import configparser
import json
import os
import re
import zoneinfo
from dataclasses import replace
from pathlib import Path
from typing import Mapping

from etl.config.dimensions import DIMENSION_SECTION, dimension_sections
from etl.config.routes import (ROUTE_SECTION, check_buildable, implicit_routes, parse_routes, route_sections,
                               with_routed_topics)
from etl.config.headers import header_columns
from etl.config.ini import is_java_options_key, read_ini, secret_java_properties
from etl.config.kafka import kafka_section
from etl.config.overrides import Override, apply_env_overrides, naming_the_variable
from etl.config.model import (
    HIVE_NAME_RE, Compression, FixedAvroSchema, HiveConfig, JobConfig, LateData, ParquetReaders,
    PartitionSource, PartitioningConfig, RetryConfig, SuccessMarkerConfig, ZooKeeperAuth, ZooKeeperConfig,
)
from etl.config.schema_registry import registry_for
from etl.config.compaction import CompactionConfig
from etl.config.metastore import metastore_client, metastore_timeout_seconds
from etl.config.jvm import jvm_section
from etl.config.metrics import metrics_section
from etl.config.rollups import ROLLUP_SECTION, rollup_sections
from etl.config.section import (
    TRANSFORM_RE, Section, column_list, hive_name, matching, non_negative_seconds, resolve, secret_file,
)
from etl.config.warehouse import warehouse_section
from etl.config.whole import Config
from etl.errors import ConfigError

SECTIONS = ("job", "kafka", "zookeeper", "warehouse", "hive", "retry", "spark",
            "schema_registry", "compaction", "metrics", "jvm")  # and [dimension|route|rollup <name>]
JOB_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
# spark.authenticate.secret, spark.ssl.keyPassword, spark.hadoop.fs.s3a.secret.key ...
_SPARK_SECRET_RE = re.compile(r"(^|\.)secret(\.|$)|password[^.]*$|secret$", re.I)
ZOOKEEPER_ONLY_DIGEST_KEYS = ("digest_user", "digest_password_file")


def load_config(path: str | os.PathLike, environ: Mapping[str, str] | None = None) -> Config:
    """Read the INI file at `path`, apply the ETL__ environment overrides (of os.environ unless
    `environ` is given), and validate; raise ConfigError naming the bad key, and the variable
    that set it if one did."""
    parser, overrides = effective_ini(path, environ)
    try:
        return parse_config(parser, Path(path))
    except ConfigError as exc:
        raise naming_the_variable(exc, overrides) from exc


def effective_ini(path: str | os.PathLike, environ: Mapping[str, str] | None = None,
                  ) -> tuple[configparser.ConfigParser, tuple[Override, ...]]:
    """The INI file at `path` with the environment's overrides applied, not yet validated."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist; pass --config with the job's INI file")
    parser = read_ini(path)
    return parser, apply_env_overrides(parser, os.environ if environ is None else environ)


def parse_config(parser: configparser.ConfigParser, path: Path) -> Config:
    known = set(SECTIONS)
    for section in parser.sections():
        if section not in known and not section.startswith((DIMENSION_SECTION, ROUTE_SECTION, ROLLUP_SECTION)):
            raise ConfigError(f"{path}: unknown section [{section}]; known sections: {sorted(known)}, "
                              f"[dimension <name>], [route <name>] and [rollup <name>]")
    routed = bool(route_sections(parser, path))
    job = _job(Section(parser, "job", path), routed)
    retry = _retry(Section(parser, "retry", path, required=False))
    kafka = kafka_section(Section(parser, "kafka", path), job.name, routed)
    spark = _spark(Section(parser, "spark", path, required=False))
    hive = _hive(Section(parser, "hive", path), spark, routed)
    check_codec_readable(job, hive, path)
    warehouse = replace(warehouse_section(Section(parser, "warehouse", path)), retry=retry)
    dimensions = dimension_sections(parser, path, job, warehouse, routed)
    names = [d.name for d in dimensions]
    routes = parse_routes(parser, path, job.decoder, dimensions, hive.rejected_table, _avro_schema_file) if routed \
        else implicit_routes(hive, kafka, job, names)
    metrics = metrics_section(Section(parser, "metrics", path, required=False))
    check_buildable(routes, path)
    return Config(
        path=path,
        job=job,
        kafka=with_routed_topics(kafka, routes) if routed else kafka,
        zookeeper=_zookeeper(Section(parser, "zookeeper", path)),
        warehouse=warehouse,
        hive=hive,
        routes=routes,
        retry=retry,
        spark=spark,
        dimensions=dimensions,
        schema_registry=registry_for(Section(parser, "schema_registry", path, required=False), job, routes),
        compaction=_compaction(Section(parser, "compaction", path, required=False)),
        metrics=metrics,
        jvm=jvm_section(Section(parser, "jvm", path, required=False)),
        rollups=rollup_sections(parser, path, routes, hive, routed),
    )


def _ratio(raw: str) -> float:
    value = float(raw)
    if not 0.0 <= value <= 1.0:
        raise ValueError("must be between 0 and 1")
    return value


def _job(s: Section, routed: bool = False) -> JobConfig:
    if routed and s.is_set("transform"):
        raise s.fail("transform", "with [route] sections each route names its own transform; move it there")
    if routed and s.is_set("avro_schema"):  # no route takes it as its default: it would be read and used by none
        raise s.fail("avro_schema", "with [route] sections each route names its own avro_schema; move it into the "
                                    "routes that read plain Avro")
    job = JobConfig(
        name=s.get("name", convert=matching(JOB_NAME_RE, "job name")),
        max_records_per_partition=s.positive("max_records_per_partition"),
        starting_offsets=s.choice("starting_offsets"),
        on_offset_out_of_range=s.choice("on_offset_out_of_range"),
        max_rejected_ratio=s.get("max_rejected_ratio", convert=_ratio),
        decoder=s.choice("decoder"),
        key_column=s.get("key_column", convert=matching(HIVE_NAME_RE, "column name")),
        row_group_size=s.positive("row_group_size"),
        compression=s.choice("compression"),
        on_dimension_change=s.choice("on_dimension_change"),
        transform=s.get("transform", convert=matching(TRANSFORM_RE, "module:function reference, e.g. "
                                                                  "etl.examples:minute_and_country")),
        avro_schema=s.get("avro_schema", convert=lambda raw: _avro_schema_file(resolve(s.path.parent, raw))),
        header_columns=s.get("header_columns", (), header_columns),
        progress_seconds=s.positive("progress_seconds"),
        records_per_task=s.positive("records_per_task"),
    )
    s.reject_unknown()
    return job


def _avro_schema_file(path: Path) -> FixedAvroSchema:
    """The .avsc file's text, checked to be an Avro schema."""
    import fastavro
    try:
        text = path.read_text(encoding="utf-8")
        fastavro.parse_schema(json.loads(text))
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from exc
    # JSON's errors are ValueErrors, and so are most of fastavro's
    except (ValueError, fastavro.schema.SchemaParseException, TypeError, KeyError) as exc:
        raise ValueError(f"{path} is not an Avro schema: {exc}") from exc
    return FixedAvroSchema(path, text)


def _spark(s: Section) -> dict[str, str]:
    """The [spark] settings, as Spark takes them. PySpark passes each one on its JVM's command
    line, where `ps` shows it to every user of the machine: secrets are refused here."""
    for key in s.values:
        if _SPARK_SECRET_RE.search(key) and not key.endswith(".file"):
            instead = ("set spark.authenticate.secret.file to a file only the job's user can read"
                       if key == "spark.authenticate.secret" else
                       "set it in spark-defaults.conf (in SPARK_CONF_DIR), readable only by the job's user")
            raise s.fail(key, f"is a secret, and Spark would show it in `ps` (every [spark] setting is on its "
                              f"JVM's command line); {instead}")
        secrets = secret_java_properties(s.values[key]) if is_java_options_key(key) else []
        if secrets:
            raise s.fail(key, f"sets the secret system property {', '.join(secrets)}, and its value would be on the "
                              f"JVM's command line, which `ps` shows to every user; put the option in a Java argument "
                              f"file readable only by the job's user and name the file here as @/path/to/file")
    return dict(s.values)


def _zk_hosts(raw: str) -> str:
    """Checked here as kazoo will read it, which would otherwise fail later with a traceback."""
    from kazoo.hosts import collect_hosts
    hosts, _ = collect_hosts(raw)  # a ValueError names the bad port
    if not hosts:
        raise ValueError("names no server; write host:port, separated by commas")
    return raw


def _zk_root(raw: str) -> str:
    if not raw.startswith("/") or raw.endswith("/") and raw != "/" or "//" in raw:
        raise ValueError("must be an absolute znode path like /etl")
    if any(part in (".", "..") for part in raw.split("/")) or "\0" in raw:
        raise ValueError("ZooKeeper paths have no '.' or '..' components; write the absolute path, like /etl")
    return raw.rstrip("/") or "/"


def _zookeeper(s: Section) -> ZooKeeperConfig:
    zk = ZooKeeperConfig(
        hosts=s.get("hosts", convert=_zk_hosts),
        root=s.get("root", convert=_zk_root),
        session_timeout_seconds=s.positive("session_timeout_seconds"),
        **_zookeeper_auth(s),
    )
    s.reject_unknown()
    return zk


def _zookeeper_auth(s: Section) -> dict:
    auth = s.choice("auth")
    if auth == ZooKeeperAuth.NONE:
        for key in ZOOKEEPER_ONLY_DIGEST_KEYS:
            if s.is_set(key):
                raise s.fail(key, "applies only to auth = digest; set auth = digest, or remove it")
        return {"auth": auth}
    user = s.get("digest_user", convert=_digest_user, required=True)
    password_file = s.get("digest_password_file", convert=lambda raw: resolve(s.path.parent, raw))
    if password_file is None:
        raise s.fail("digest_password_file", "is required with auth = digest: name a file that holds "
                                             "the password alone (the INI holds no password)")
    return {"auth": auth, "digest_user": user, "digest_password": secret_file(s, "digest_password_file"),
            "digest_password_file": password_file}


def _digest_user(raw: str) -> str:
    if ":" in raw or any(c.isspace() for c in raw):
        raise ValueError("a digest user name has no ':' and no spaces (ZooKeeper reads user:password)")
    return raw


def _metastore(raw: str) -> str:
    if raw != "embedded" and not re.match(r"^thrift://[^:/]+:\d+$", raw):
        raise ValueError("must be 'embedded' or thrift://host:port")
    return raw


def _hive(s: Section, spark: Mapping[str, str], routed: bool = False) -> HiveConfig:
    table, schema = _routed_hive(s) if routed else _one_table(s)
    metastore = s.get("metastore", convert=_metastore)
    hive = HiveConfig(
        metastore=metastore,
        metastore_client=metastore_client(s, metastore, spark),
        metastore_timeout_seconds=metastore_timeout_seconds(spark),
        # Hive folds names to lower case, so Events and events are one table: folded here, so that
        # they also name one folder and one binding.
        database=s.get("database", convert=hive_name("Hive database name")),
        table=table,
        schema_file=schema,
        rejected_table=s.get("rejected_table", f"{table}_rejected", hive_name("Hive table name"),
                             required=routed),
        format=s.choice("format"),
        parquet_readers=s.choice("parquet_readers"),
        bloom_filter_columns=s.get("bloom_filter_columns", (), column_list),
        sort_by=s.get("sort_by", (), column_list),
        success_markers=_success_markers(s),
        partitioning=_partitioning(s),
        max_partitions_per_batch=s.get("max_partitions_per_batch", convert=_partition_cap),
        on_too_many_partitions=s.choice("on_too_many_partitions"),
    )
    if hive.partitioning.late_data is LateData.REJECT and not hive.success_markers.enabled:
        raise s.fail("late_data", "reject needs success_markers = true: without markers no partition is ever "
                                  "finished, so no row is late")
    s.reject_unknown()
    return hive


def check_codec_readable(job: JobConfig, hive: HiveConfig, path: Path) -> None:
    """Hive 2.3's readers have no zstd, for Parquet (parquet-mr 1.8) nor ORC (ORC 1.3; zstd came in
    ORC 1.6): a table that must serve them cannot use it, nor can its rejected table (Parquet)."""
    if job.compression is Compression.ZSTD and hive.parquet_readers is ParquetReaders.HIVE_2_3:
        raise ConfigError(f"{path}: [job] compression: zstd cannot be read by Hive 2.3's readers, which "
                          f"[hive] parquet_readers = {hive.parquet_readers} says the files serve; choose snappy, or "
                          f"set [hive] parquet_readers = current if no Hive 2.3 reads the table")


def _one_table(s: Section) -> tuple[str, Path]:
    schema = s.get("schema", convert=lambda raw: resolve(s.path.parent, raw), required=True)
    if not schema.is_file():
        raise s.fail("schema", f"file {schema} does not exist")
    return s.get("table", convert=hive_name("Hive table name"), required=True), schema


def _routed_hive(s: Section) -> tuple[None, None]:
    for key in ("table", "schema"):
        if s.is_set(key):
            raise s.fail(key, "with [route] sections each route names its table and schema; move it into one")
    return None, None


def _partitioning(s: Section) -> PartitioningConfig:
    source, column = s.get("partition_by", convert=_partition_by)
    return PartitioningConfig(
        source=source, column=column,
        timezone=s.get("partition_timezone", convert=_timezone),
        on_missing_event_time=s.choice("on_missing_event_time"),
        late_data=s.choice("late_data"),
        idle_partition_seconds=s.get("idle_partition_seconds", convert=non_negative_seconds),
        max_future_seconds=s.get("max_future_seconds", convert=non_negative_seconds),
        future_data=s.choice("future_data"),
        max_open_files=s.positive("max_open_partition_files"),
    )


def _partition_cap(raw: str) -> int:
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"must be a whole number of partitions, 1 or more (or left out: no cap), got {raw!r}")
    return int(raw)


def _partition_by(raw: str) -> tuple[PartitionSource, str | None]:
    kind, colon, column = raw.partition(":")
    if colon and kind == PartitionSource.COLUMN:
        if not HIVE_NAME_RE.match(column):
            raise ValueError(f"column:{column}: {column!r} is not a column name")
        return PartitionSource.COLUMN, column.lower()
    if not colon and raw in (PartitionSource.PLANNING_TIME, PartitionSource.KAFKA_TIMESTAMP):
        return PartitionSource(raw), None
    raise ValueError(f"{raw!r} is not one of planning_time, kafka_timestamp, column:<name>")


def _timezone(raw: str) -> str:
    try:
        zoneinfo.ZoneInfo(raw)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"{raw!r} is not an IANA time zone (e.g. UTC, Europe/Madrid)") from exc
    return raw


def _success_markers(s: Section) -> SuccessMarkerConfig:
    return SuccessMarkerConfig(
        enabled=s.get("success_markers"),
        delay_seconds=s.get("success_marker_delay_seconds", convert=non_negative_seconds),
    )


def _retry(s: Section) -> RetryConfig:
    retry = RetryConfig(
        attempts=s.positive("attempts"),
        initial_wait_seconds=s.positive("initial_wait_seconds"),
        max_wait_seconds=s.positive("max_wait_seconds"),
    )
    s.reject_unknown()
    return retry


def _compaction(s: Section) -> CompactionConfig:
    config = CompactionConfig(
        target_file_mb=s.positive("target_file_mb"),
        min_files=s.get("min_files", convert=_at_least_two),
        only_finished=s.get("only_finished"),
        keep_superseded_minutes=s.get("keep_superseded_minutes",
                                      convert=lambda raw: non_negative_seconds(raw, "minutes")),
        after_run=s.get("after_run"),
    )
    s.reject_unknown()
    return config


def _at_least_two(raw: str) -> int:
    value = int(raw)
    if value < 2:
        raise ValueError("must be 2 or more: merging one file into one file gains nothing")
    return value
