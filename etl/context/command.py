"""The context of a command that reads or writes the job's state and warehouse, not Kafka.

Nothing is built before it is asked for: `etl history` opens ZooKeeper and nothing else, and
Spark starts only when its session (or context) is first asked for: by the tasks, a DDL
statement, or a registrar on Spark's Hive client. What was opened is
closed, last opened first, when the context closes (it is a context manager). The Hive modules
are imported there too, so that a command that never asks does not pay for their import."""
from __future__ import annotations

import contextlib
import datetime as dt
from dataclasses import replace
from typing import TYPE_CHECKING, Callable, Self

from etl.config import Config, HiveConfig, RetryConfig
from etl.model.shape import JobShape, shape_of
from etl.model.batch import utc_now
from etl.model.partitioning import Partitioner
from etl.model.schema import TableSchema, load_table_schema
from etl.model.table_ddl import DEFAULT_PARTITIONS, TableDdl
from etl.sink.fs import WarehouseFileSystem, filesystem_for
from etl.sink.warehouse import Warehouse
from etl.state.paths import ZkPaths
from etl.state.protocols import StateStore
from etl.state.store import OffsetsMoved, ZkStateStore

if TYPE_CHECKING:
    from etl.hive.catalog import MetastoreCatalog
    from etl.hive.registrar import HiveRegistrar
    from etl.hive.starter import SparkStarter


class CommandContext:
    """`clock`: the one clock of the command (tests freeze it); `create_nodes`: False for the
    commands that only read, so that they create none of the job's znodes; `retry`: another
    retry policy than [retry]'s (the run's metrics try once). `store` and `fs`, when handed in
    (the unit tests: tests/harness/memory_store.py and a local folder), are used instead of
    ZooKeeper and the configured warehouse, and left open: their owner closes them."""

    def __init__(self, config: Config, clock: Callable[[], dt.datetime] = utc_now, create_nodes: bool = True,
                 retry: RetryConfig | None = None, store: StateStore | None = None,
                 fs: WarehouseFileSystem | None = None):
        self.config, self.clock = config, clock
        self.shape: JobShape = shape_of(config)  # one table, or [route] sections: what differs (etl.model.shape)
        self._create_nodes = create_nodes
        self._retry = config.retry if retry is None else retry
        self._opened = contextlib.ExitStack()
        self._store: StateStore | None = store
        self._fs: WarehouseFileSystem | None = fs
        self._warehouse: Warehouse | None = None
        self._partitioner: Partitioner | None = None
        self._spark: SparkStarter | None = None
        self._catalog: MetastoreCatalog | None = None
        self._registrar: HiveRegistrar | None = None
        self._table_registrars: dict[str, HiveRegistrar] = {}  # a routed job's tables, by name
        # Apart from those: a table met here first must still be evolved when a batch asks for it.
        self._existing_tables: dict[str, HiveRegistrar] = {}

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._opened.close()

    @property
    def store(self) -> StateStore:
        """The job's state in ZooKeeper, connected on first use."""
        if self._store is None:
            # what the store calls (a mirror) is built first, so it closes after the store
            store = ZkStateStore(self.config.zookeeper, self.config.job.name, self._retry,
                                 offsets_moved=self._offsets_moved())
            store.connect(self._create_nodes)
            self._opened.callback(store.close)
            self._store = store
        return self._store

    def job_started(self) -> bool:
        """Whether the job's state exists yet: a command that creates none of its nodes
        (create_nodes=False) reads nothing before its first command created them."""
        store = self.store
        return store.session.has_job_nodes() if isinstance(store, ZkStateStore) else True

    def _offsets_moved(self) -> OffsetsMoved | None:
        """What the store calls after a transaction that moved offsets: nothing here
        (etl.context.job mirrors them to Kafka)."""
        return None

    @property
    def fs(self) -> WarehouseFileSystem:
        if self._fs is None:
            self._fs = filesystem_for(self.config.warehouse)
        return self._fs

    @property
    def warehouse(self) -> Warehouse:
        """The table's folders as the config names them, without the relocations compactions
        recorded: `located()` adds those, read from the store at that moment."""
        if self._warehouse is None:
            self._warehouse = Warehouse.of(self.config)
        return self._warehouse

    def located(self) -> Warehouse:
        """The warehouse with where compacted partitions' files are now (from the store)."""
        return self.warehouse.with_relocations(self.store.compactions.relocations())

    @property
    def partitioner(self) -> Partitioner:
        """The table's partitioner, in the zone of [hive] partitioning, from the DDL (read on
        first use: a command that needs it asks before it touches anything)."""
        if self._partitioner is None:
            ddl = self.config.partition_schema_file
            columns = load_table_schema(ddl, self.config.job.key_column).partition_columns if ddl \
                else DEFAULT_PARTITIONS
            self._partitioner = TableSchema((), columns).partitioner.in_zone(self.config.hive.partitioning.timezone)
        return self._partitioner

    @property
    def spark(self) -> SparkStarter:
        """The command's one SparkSession, started when its `session()` is first called."""
        if self._spark is None:
            self._spark = self._spark_starter()
        return self._spark

    def _spark_starter(self) -> SparkStarter:
        from etl.hive.starter import SparkStarter
        return SparkStarter(self.config)  # no Python workers warmed: these commands run no Spark task

    @property
    def catalog(self) -> MetastoreCatalog:
        """The command's one metastore client for reads and partition adds ([hive] metastore_client):
        a Thrift connection of the driver's own, or Spark's Hive client (which starts Spark)."""
        if self._catalog is None:
            from etl.config import MetastoreClient
            from etl.hive.catalog import SparkCatalog
            if self.config.hive.metastore_client is MetastoreClient.THRIFT:
                from etl.hive.thrift_catalog import ThriftCatalog
                catalog = ThriftCatalog(self.config.hive.metastore, self.config.hive.metastore_timeout_seconds)
                self._opened.callback(catalog.close)
                self._catalog = catalog
            else:
                self._catalog = SparkCatalog(self.spark.session)
        return self._catalog

    def registrar(self) -> HiveRegistrar:
        """Reach the metastore, and create or evolve the tables, as a run does: once. A routed
        job's ensures the database and the rejected table (its tables: `table_registrar`)."""
        if self._registrar is None:
            from etl.hive.registrar import HiveRegistrar
            registrar = HiveRegistrar(self.catalog, self.spark.session, self.config.hive, self.warehouse,
                                      owner=self._owner())
            self._own_folders(self.warehouse.database_root, self.warehouse.rejected_root, self.warehouse.table_root)
            registrar.ensure_tables()
            self._registrar = registrar
        return self._registrar

    def table_registrar(self, view: Config, warehouse: Warehouse, ddl: TableDdl | None = None) -> HiveRegistrar:
        """One of a routed job's tables (`view`: Config.for_table, `warehouse`: its folders, `ddl`: its
        writer spec's, else the view's DDL file), on the command's metastore client: created, or claimed
        and evolved, once per command."""
        name = view.hive.the_table
        if name not in self._table_registrars:
            registrar = self._table_client(view.hive, warehouse)
            self._own_folders(warehouse.table_root)
            registrar.ensure_table(ddl)
            self._table_registrars[name] = registrar
        registrar = self._table_registrars[name]
        registrar.warehouse = warehouse  # where the batch writes, as the Job's registrar is told
        return registrar

    def existing_table(self, name: str) -> HiveRegistrar:
        """One of a routed job's tables as it exists (compaction's: etl.compaction.tables), on the
        command's metastore client: its owner checked, nothing created or evolved, no DDL read."""
        if name not in self._existing_tables:
            registrar = self._table_client(replace(self.config.hive, table=name, schema_file=None),
                                           self.warehouse.for_table(name))
            registrar.check_claimed()
            self._existing_tables[name] = registrar
        return self._existing_tables[name]

    def _table_client(self, hive: HiveConfig, warehouse: Warehouse) -> HiveRegistrar:
        """A routed table's registrar, on the command's metastore client, after the job's own."""
        from etl.hive.registrar import HiveRegistrar
        self.registrar()  # the job's own tables first
        return HiveRegistrar(self.catalog, self.spark.session, hive, warehouse, owner=self._owner())

    def _own_folders(self, *folders: str) -> None:
        """Make the tables' folders as the job's warehouse user before the metastore is asked for
        the tables: it would make a missing one as its own user, and with HDFS permissions on the
        job could then not write its partitions there. Nothing to do where they exist."""
        for folder in filter(None, folders):  # a routed job's warehouse has no table_root
            self.fs.makedirs(folder)

    def _owner(self) -> str:
        return ZkPaths(self.config.zookeeper.root, self.config.job.name).job  # the job's own znode
