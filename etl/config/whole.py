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
from etl.config.rollups import RollupConfig
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
    rollups: tuple[RollupConfig, ...] = ()

    @property
    def partition_schema_file(self) -> Path | None:
        """The DDL whose PARTITIONED BY the job's partitions follow: the table's, or a routed job's
        first route's with a DDL file (etl.job.assemble checks that every route's partitions alike);
        None when every route follows the Schema Registry (etl.model.table_ddl.DEFAULT_PARTITIONS). A
        config without [route] sections has one route, whose DDL is [hive] schema."""
        return next((route.schema_file for route in self.routes.routes if route.schema_file is not None), None)

    @property
    def topics_chooser(self) -> str:
        """What chooses the job's topics, as messages name it: a [kafka] key, or the routes."""
        return self.routes.topics_chooser(self.kafka)

    def for_table(self, route: RouteConfig, table: str) -> "Config":
        """This config as one table's, for the code that acts on one table: [hive] table and
        schema are the route's table (`table`: its template filled in) and DDL, [job] decoder,
        avro_schema and transform the route's, and the dimensions those it joins."""
        return replace(self, hive=replace(self.hive, table=table, schema_file=route.schema_file),
                       job=replace(self.job, decoder=route.decoder, avro_schema=route.avro_schema,
                                   transform=route.transform),
                       dimensions=tuple(d for d in self.dimensions if d.name in route.dimensions))
