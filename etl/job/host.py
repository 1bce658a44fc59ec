"""What a Job is handed: the command's parts, built once by its context (etl.context.job).

The Job, the batch state machine, builds no client of its own: it asks its host for the store,
Kafka, the writer spec, Spark, the warehouse, the clock and the job's shape (one table or
routes: etl.model.shape), and for the Hive registrar when a batch first needs the tables."""
from __future__ import annotations

import datetime as dt
from typing import Callable, Protocol

from etl.config import Config, DimensionConfig
from etl.config.routes import RouteConfig
from etl.hive.registrar import HiveRegistrar
from etl.hive.starter import SparkStarter
from etl.job.partition_writer import WriterSpec
from etl.job.rollup_mirror import RollupMirror
from etl.model.shape import JobShape
from etl.model.partitioning import Partitioner
from etl.model.schema import TableSchema
from etl.model.table_ddl import TableDdl
from etl.rows.decoders import Decoder
from etl.sink.fs import WarehouseFileSystem
from etl.sink.warehouse import Warehouse
from etl.source.kafka import KafkaMetadata
from etl.state.protocols import StateStore


class BatchHost(Protocol):
    @property
    def config(self) -> Config: ...

    @property
    def store(self) -> StateStore: ...

    @property
    def kafka(self) -> KafkaMetadata: ...

    @property
    def shape(self) -> JobShape:
        """One table, or [route] sections: what differs between them (etl.model.shape)."""

    @property
    def spec(self) -> WriterSpec:
        """The job's table's (a routed job's first route's: etl.context.job)."""

    def spec_for(self, route: RouteConfig, topic: str | None = None) -> WriterSpec:
        """The writer spec of one route's tables (a registry route's: of its table for `topic`)."""

    def probe_for(self, route: RouteConfig, field: str, topic: str) -> Decoder:
        """The decoder of a split topic's field (etl.rows.routing)."""

    def dimension_schema(self, dimension: DimensionConfig) -> TableSchema:
        """The DDL a joined dimension is cast to: a route's that joins it (etl.job.assemble)."""

    @property
    def spark(self) -> SparkStarter: ...

    @property
    def fs(self) -> WarehouseFileSystem: ...

    @property
    def warehouse(self) -> Warehouse:
        """As the config names it: the Job adds the relocations before each batch."""

    @property
    def partitioner(self) -> Partitioner: ...

    @property
    def clock(self) -> Callable[[], dt.datetime]: ...

    @property
    def rollup_mirror(self) -> RollupMirror:
        """The rollups kept in PostgreSQL too (etl.job.rollup_mirror): none for most jobs."""

    def registrar(self) -> HiveRegistrar:
        """The Hive client, its tables created or evolved: Spark starts on the first call."""

    def table_registrar(self, view: Config, warehouse: Warehouse, ddl: TableDdl | None = None) -> HiveRegistrar:
        """One of a routed job's tables, created, or claimed and evolved (from `ddl`: its writer
        spec's), on first use."""
