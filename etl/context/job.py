"""The context of a command that reads Kafka, or runs batches: `etl run`, `etl recover`, `etl
reset-offsets`, `etl status`, `etl check`, `etl verify`, `etl schema suggest`, and the run's
metrics. To CommandContext's parts it adds, each built on first use: the Kafka metadata client,
the mirror of committed offsets to the job's consumer group, the writer spec, and the Job.

`moves_offsets`: the command moves committed offsets (a run's commits, a reset, a recovery), so
the store calls the mirror after each such transaction (etl.source.group_mirror); the mirror is
opened before the store and closed after it. `runs_batches`: the command runs a Job's batches
(`etl run`, `etl recover`), so Spark's Python workers are warmed as the session starts
(etl.job.warm_up)."""
from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Callable, Collection, Mapping

from etl.config import Config, DimensionConfig, MetastoreClient, RetryConfig
from etl.config.rollups import rollup_route
from etl.config.routes import RouteConfig
from etl.context.command import CommandContext
from etl.errors import PostgresUnavailable
from etl.job.observer import NO_OBSERVER, JobObserver, Phase, timed
from etl.model.batch import utc_now
from etl.model.partitioning import Partitioner
from etl.model.route_binding import RouteBinding
from etl.model.schema import Column, TableSchema
from etl.model.table_ddl import DEFAULT_PARTITIONS, TableDdl
from etl.retry import retry_idempotent
from etl.rows.decoders.writer_schemas import WriterSchemas
from etl.sink.fs import WarehouseFileSystem
from etl.source.group_mirror import OffsetMirror
from etl.sink.warehouse import Warehouse
from etl.source.kafka import KafkaMetadata
from etl.source.topics import TopicRouting
from etl.state.protocols import StateStore
from etl.state.store import OffsetsMoved

if TYPE_CHECKING:  # imported where first used: `etl status` and `etl check` need none of the job's modules
    from etl.hive.spark import EarlyLaunch
    from etl.hive.registrar import HiveRegistrar
    from etl.hive.starter import SparkStarter
    from etl.job.driver import Job
    from etl.job.partition_writer import WriterSpec
    from etl.job.rollup_mirror import RollupMirror
    from etl.config.rollup_target import PostgresTarget
    from etl.model.batch import Batch
    from etl.model.rollup_table import RollupSpec
    from etl.postgres.rollup_db import RollupDatabase
    from etl.rows.decoders import Decoder


class JobContext(CommandContext):
    def __init__(self, config: Config, clock: Callable[[], dt.datetime] = utc_now, create_nodes: bool = True,
                 retry: RetryConfig | None = None, store: StateStore | None = None,
                 fs: WarehouseFileSystem | None = None, moves_offsets: bool = False, runs_batches: bool = False,
                 observer: JobObserver = NO_OBSERVER, early: EarlyLaunch | None = None):
        """`early`: the driver JVM `etl run` launched before it imported and planned
        (etl.hive.spark.launch_early): Spark connects to it, or the context kills it unused."""
        super().__init__(config, clock, create_nodes, retry, store, fs)
        self.observer = observer
        self._early = early
        if early is not None:
            self._opened.callback(early.jvm.abandon)  # killed unless Spark connected to it
        self._moves_offsets, self._runs_batches = moves_offsets, runs_batches
        self._mirror: OffsetMirror | None = None
        self._kafka: KafkaMetadata | None = None
        self._specs: dict[str, WriterSpec] | None = None  # route name -> spec, of the routes with a DDL file
        self._derived: dict[tuple[str, str], WriterSpec] = {}  # (route name, topic) -> a registry route's table's
        self._probes: dict[tuple[str, str, str], Decoder] = {}  # (route name, topic or "", field) -> a split's probe
        self._writer_schemas: WriterSchemas | None = None
        self._job: Job | None = None
        self._databases: dict[str, RollupDatabase] | None = None
        self._rollup_mirror: RollupMirror | None = None

    @property
    def mirror(self) -> OffsetMirror:
        if self._mirror is None:
            mirror = OffsetMirror(self.config.kafka, on_failure=self.observer.consumer_group_commit_failed)
            self._opened.callback(mirror.close)
            self._mirror = mirror
        return self._mirror

    def _offsets_moved(self) -> OffsetsMoved | None:
        return self.mirror.commit if self._moves_offsets else None

    @property
    def kafka(self) -> KafkaMetadata:
        """The Kafka metadata client: topics, partitions, watermarks, offsets by time."""
        if self._kafka is None:
            kafka = KafkaMetadata(self.config.kafka, self._retry, self.config.job.name, self._topic_routing())
            self._opened.callback(kafka.close)
            self._kafka = kafka
        return self._kafka

    @property
    def writer_schemas(self) -> WriterSchemas | None:
        """The Schema Registry's client settings ([schema_registry]; None without it), built once:
        the decoders and the registry routes' tables ask through them."""
        if self._writer_schemas is None and self.config.schema_registry is not None:
            self._writer_schemas = WriterSchemas(self.config.schema_registry, self._retry)
        return self._writer_schemas

    @property
    def spec(self) -> WriterSpec:
        """What the tasks need to write (etl.job.assemble.writer_spec): the job's table's, or a
        routed job's first route's with a DDL file (else the first registry route's first listed
        topic's: etl.config.routes.check_buildable sees that there is one). Every DDL route's is
        built and checked on first use: a command that runs batches asks before it touches anything."""
        routes = self.config.routes.routes
        route = next((r for r in routes if not r.from_registry), None) or next(r for r in routes if r.topics)
        return self.spec_for(route, route.topics[0] if route.from_registry else None)

    def spec_for(self, route: RouteConfig, topic: str | None = None) -> WriterSpec:
        """The writer spec of one route's tables; a registry route's, of its table for `topic`,
        derived from the registry once per command (etl.job.registry_tables)."""
        if not route.from_registry:
            return self._ddl_specs()[route.name]
        assert topic is not None, f"{route.describe()}: a registry route's spec is its topic's table's"
        if (route.name, topic) not in self._derived:
            from etl.job.registry_tables import registry_spec
            self._derived[(route.name, topic)] = registry_spec(self.config, route, topic, self.writer_schemas,
                                                               self._partition_columns())
        return self._derived[(route.name, topic)]

    def _ddl_specs(self) -> dict[str, WriterSpec]:
        """Every route's with a DDL file, built and checked together once (etl.job.assemble.route_specs)."""
        if self._specs is None:
            from etl.job.assemble import route_specs
            self._specs = route_specs(self.config, self.writer_schemas)
        return self._specs

    def dimension_schema(self, dimension: DimensionConfig) -> TableSchema:
        """The DDL a joined dimension's key and columns are cast to when it is loaded."""
        from etl.job.assemble import dimension_schema
        return dimension_schema(self.config, self._ddl_specs(), dimension)

    def _partition_columns(self) -> tuple[Column, ...]:
        """What a registry route's table is partitioned by: as the DDL routes' tables, or the default."""
        first = next(iter(self._specs.values()), None) if self._specs else None
        return first.schema.partition_columns if first is not None else DEFAULT_PARTITIONS

    def probe_for(self, route: RouteConfig, field: str, topic: str) -> Decoder:
        """The decoder of a split topic's field: the route's decoder over that field alone."""
        key = (route.name, topic if route.from_registry else "", field)
        if key not in self._probes:
            from etl.job.assemble import probe_decoder
            self._probes[key] = probe_decoder(self.config, route, field, self.spec_for(route, topic),
                                              self.writer_schemas)
        return self._probes[key]

    @property
    def partitioner(self) -> Partitioner:
        """The writer spec's, when it is built, so that the DDL is read once; else the DDL's alone
        (`etl run --dry-run` builds no decoder)."""
        if self._partitioner is None and self._specs is not None:
            self._partitioner = self.spec.schema.partitioner.in_zone(self.config.hive.partitioning.timezone)
        return super().partitioner

    def _topic_routing(self) -> TopicRouting | None:
        """With [route] sections: each chosen topic's tables (etl.model.shape)."""
        return self.shape.topic_routing(lambda routes: TopicRouting(routes, self.config.hive.rejected_table,
                                                                    self._committed_topics, self._retired_tables))

    def _retired_tables(self, committed: set[str]) -> Mapping[str, Collection[str]]:
        """The tables the job's binding retired, each with the committed topics it holds."""
        bound = self.store.operator.binding() if committed else None  # nothing committed: nothing retired holds records
        return bound.retired_owners(committed, self.config.routes) if isinstance(bound, RouteBinding) else {}

    def _committed_topics(self) -> set[str]:
        if not self.job_started():  # a command that creates no node, before the job's first
            return set()
        return {topic for topic, _ in self.store.offsets.committed_offsets()}

    def _spark_starter(self) -> SparkStarter:
        if not self._runs_batches:
            return super()._spark_starter()
        # the batch's tasks run on Python workers: they start as soon as the SparkContext is up
        from etl.hive.starter import SparkStarter
        from etl.job.warm_up import warm_python_workers
        return SparkStarter(self.config, on_start=warm_python_workers, timing=lambda: timed(self.observer, Phase.SPARK),
                            early=self._early)

    def registrar(self) -> HiveRegistrar:
        """The first call reaches the metastore and ensures the tables and the rollups' (the observer's TABLES
        phase), whoever asks first (a batch, or a compaction). On Spark's Hive client, Spark
        starts first (SPARK, timed by the starter); with the Thrift client it starts when the
        tasks or a DDL statement need it."""
        if self._registrar is None:
            if self.config.hive.metastore_client is MetastoreClient.SPARK:
                self.spark.session()
            with timed(self.observer, Phase.TABLES):
                registrar = super().registrar()
                if self._runs_batches:  # a rollup's rebuild makes its own (etl.ops.rollup_rebuild)
                    self._ensure_rollups(registrar)
                return registrar
        return super().registrar()

    def _ensure_rollups(self, registrar: HiveRegistrar) -> None:
        """Each rollup's partials table and view (etl.model.rollup_table); `loaded`: whether its
        table already holds committed rows (a topic of its route has committed offsets)."""
        if not self.config.rollups:
            return  # no writer spec is built for nothing
        rollups = [rollup for spec in self._ddl_specs().values() for rollup in spec.rollups]
        committed = {key: offset.value for key, offset in self.store.offsets.committed_offsets().items()}
        opened = self.store.batches.open_batch() if self.rollup_databases else None
        for spec in rollups:
            route = rollup_route(spec.rollup, self.config.routes)
            registrar.ensure_rollup(spec, loaded=any(route.chooses(topic) for topic, _ in committed))
            database = self.rollup_databases.get(spec.rollup.name)
            if database is not None:
                self._ensure_in_postgres(database, spec, committed, opened[0] if opened else None)

    def _ensure_in_postgres(self, database: RollupDatabase, spec: RollupSpec, committed: dict[tuple[str, int], int],
                            opened: Batch | None) -> None:
        """A rollup's tables in its database (a new one catches up from the partials), and its
        offsets there none past ZooKeeper's `committed` but the `opened` batch's own
        (etl.job.rollup_mirror)."""
        from etl.job.rollup_mirror import refuse_ahead
        where = database.target.describe()
        retry_idempotent(self._retry, (PostgresUnavailable,), f"{spec.rollup.describe()}'s tables in {where}",
                         lambda: database.ensure(spec))
        positions = retry_idempotent(self._retry, (PostgresUnavailable,), f"{spec.rollup.describe()}'s offsets in "
                                     f"{where}", lambda: database.positions(spec))
        refuse_ahead(spec, positions, committed, opened, where)

    @property
    def rollup_databases(self) -> dict[str, RollupDatabase]:
        """The rollups' PostgreSQL targets, by rollup name: one connection per target, opened on
        first use and closed with the context."""
        if self._databases is None:
            by_url: dict[str, RollupDatabase] = {}
            self._databases = {}
            for rollup in self.config.rollups:
                if rollup.target is None:
                    continue
                if rollup.target.url not in by_url:
                    by_url[rollup.target.url] = self._rollup_database(rollup.target)
                    self._opened.callback(by_url[rollup.target.url].close)
                self._databases[rollup.name] = by_url[rollup.target.url]
        return self._databases

    def _rollup_database(self, target: PostgresTarget) -> RollupDatabase:
        from etl.postgres.rollup_db import RollupDatabase  # psycopg: imported only by a job with a target
        return RollupDatabase(target, self.config.job.name)

    @property
    def rollup_mirror(self) -> RollupMirror:
        if self._rollup_mirror is None:
            from etl.job.rollup_mirror import RollupMirror
            self._rollup_mirror = RollupMirror(self.fs, self.rollup_databases, self._retry)
        return self._rollup_mirror

    def table_registrar(self, view: Config, warehouse: Warehouse, ddl: TableDdl | None = None) -> HiveRegistrar:
        """A routed job's table, ensured on first use: also the TABLES phase."""
        if view.hive.the_table not in self._table_registrars:
            self.registrar()  # Spark and the job's own tables, each its own phase
            with timed(self.observer, Phase.TABLES):
                return super().table_registrar(view, warehouse, ddl)
        return super().table_registrar(view, warehouse, ddl)

    def job(self) -> Job:
        """The batch state machine over this context's parts (the caller holds the lock); Spark
        starts when a batch first needs it."""
        if self._job is None:
            from etl.job.driver import Job
            self._job = Job(self, self.observer)
        return self._job
