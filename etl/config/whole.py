"""The whole job config: every section's settings, and the routes that say which records go
to which table (etl.config.routes, which builds on the sections' types in etl.config.model)."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Mapping

from etl.config.compaction import CompactionConfig
from etl.config.jvm import JvmConfig
from etl.config.metrics import MetricsConfig
from etl.config.model import (
    DimensionConfig, HiveConfig, JobConfig, KafkaConfig, RetryConfig, SchemaRegistryConfig, WarehouseConfig,
    ZooKeeperConfig,
)
from etl.config.routes import RouteConfig, Routes


@dataclass(frozen=True)
class Config:
    path: Path
    job: JobConfig
    kafka: KafkaConfig
    zookeeper: ZooKeeperConfig
    warehouse: WarehouseConfig
    hive: HiveConfig
    routes: Routes  # which records go to which table; one implicit route without [route] sections
    retry: RetryConfig = field(default_factory=RetryConfig)
    spark: Mapping[str, str] = field(default_factory=dict)
    dimensions: tuple[DimensionConfig, ...] = ()
    schema_registry: SchemaRegistryConfig | None = None
    compaction: CompactionConfig = field(default_factory=CompactionConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    jvm: JvmConfig = field(default_factory=JvmConfig)

    def for_table(self, route: RouteConfig, table: str) -> "Config":
        """This config as one table's: [hive] table and schema are that route's table (`table`:
        the route's table, its template filled in) and DDL."""
        return replace(self, hive=replace(self.hive, table=table, schema_file=route.schema_file))
