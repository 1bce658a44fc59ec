"""The job's INI config, parsed and validated once into frozen dataclasses.

Nothing below this package reads the config file or the environment for settings: the typed
objects are passed down. Every ConfigError names the section and key at fault.

  model.py       the sections' dataclasses, and an enum for every setting that names one of a list
  whole.py       Config: the whole job config, its sections and its routes
  routes.py      [route <name>]: which records go to which table, when a job fills several
  parse.py       load_config: the file, its sections, and the small ones ([job], [hive], ...)
  keys.py        every key the ETL reads: its section, type, default, doc, secrecy, Kafka Connect's equivalent
  section.py     typed, key-checked reading of one section (keys from keys.py), and the checks sections share
  kafka.py       [kafka]: the ETL's own keys, reserved and secret librdkafka keys, the probe
  warehouse.py   [warehouse]: local folder or WebHDFS, and WebHDFS auth
  dimensions.py  [dimension <name>]: reference data sources
  schema_registry.py  [schema_registry]: the Schema Registry client's settings
  headers.py     [job] header_columns: Kafka record headers into columns
  compaction.py  [compaction]: when small files are merged
  ini.py         the INI syntax (comments) every reader uses, and which keys hold secrets
  overrides.py   ETL__SECTION__KEY environment overrides, and the effective config, masked
  metrics.py     [metrics]: where `etl run` publishes Prometheus metrics
"""
from etl.config.compaction import CompactionConfig
from etl.config.metrics import MetricsConfig
from etl.config.kafka import KAFKA_OWN_KEYS, KAFKA_RESERVED, KAFKA_SECRET_KEYS, KafkaSettings
from etl.config.model import (
    HIVE_NAME_RE, WEBHDFS_SCHEMES, Compression, DecoderKind, DimensionChangePolicy, DimensionConfig,
    DimensionFormat, DimensionKind, FixedAvroSchema, HeaderColumn, HiveConfig, HiveFormat, JobConfig,
    KafkaConfig, LateData, MetastoreClient, MissingEventTime, OutOfRangePolicy, PartitionSource, PartitioningConfig,
    RetryConfig, SchemaRegistryConfig, StartingOffsets, SuccessMarkerConfig, WarehouseAuth, WarehouseConfig,
    ZooKeeperAuth, ZooKeeperConfig,
)
from etl.config.partitioning import FutureData
from etl.config.whole import Config
from etl.config.overrides import Override, render_effective
from etl.config.parse import effective_ini, load_config, parse_config

__all__ = [
    "HIVE_NAME_RE", "KAFKA_OWN_KEYS", "KAFKA_RESERVED", "KAFKA_SECRET_KEYS", "WEBHDFS_SCHEMES", "CompactionConfig",
    "Compression",
    "Config", "DecoderKind", "DimensionChangePolicy", "DimensionConfig", "DimensionFormat", "DimensionKind",
    "FixedAvroSchema", "HeaderColumn", "HiveConfig", "HiveFormat", "JobConfig", "KafkaConfig", "KafkaSettings",
    "LateData", "MetastoreClient", "MetricsConfig", "MissingEventTime", "OutOfRangePolicy", "PartitionSource",
    "PartitioningConfig", "RetryConfig",
    "SchemaRegistryConfig", "StartingOffsets", "SuccessMarkerConfig", "WarehouseAuth", "WarehouseConfig",
    "ZooKeeperAuth", "ZooKeeperConfig", "Override", "effective_ini", "load_config", "parse_config", "render_effective",
    "FutureData",
]
