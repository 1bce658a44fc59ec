"""`etl compact`: merge small files of finished Hive partitions, under the job lock
(etl.compaction.run). Prints what it did, or with --dry-run what it would do, and changes
nothing then: neither a file, nor ZooKeeper's state, nor the metastore.

A compaction reads no Kafka and writes no batch: the command builds no Kafka client and no
writer spec, only what etl.compaction.run.CompactionHost asks for."""
from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Callable

from etl.compaction.run import compact
from etl.config import Config
from etl.errors import EXIT_OK
from etl.hive.registrar import HiveRegistrar
from etl.hive.spark import SparkStarter
from etl.model.batch import utc_now
from etl.model.partitioning import Partitioner
from etl.model.schema import load_table_schema
from etl.sink.fs import WarehouseFileSystem, filesystem_for
from etl.sink.warehouse import Warehouse
from etl.state.store import ZkStateStore


def run_compact(config: Config, only: list[str] | None, dry_run: bool, as_json: bool, out=print) -> int:
    partitioner = load_table_schema(config.hive.schema_file, config.job.key_column).partitioner.in_zone(
        config.hive.partitioning.timezone)  # the DDL is read before anything is touched, as `etl run` does
    with ZkStateStore(config.zookeeper, config.job.name, config.retry) as store:
        holder = store.acquire_lock()
        if holder is not None:
            out(f"etl: job {config.job.name} is running: {holder.describe()}. Nothing was compacted; run again "
                f"when it is done (or set [compaction] after_run = true to compact at the end of every run).")
            return EXIT_OK
        try:
            report = compact(CompactContext(config, store, partitioner), only, dry_run)
        finally:
            store.release_lock()
    out(json.dumps(report.to_json(), indent=2) if as_json else report.render())
    return EXIT_OK


@dataclass
class CompactContext:
    """What `etl compact` hands the compaction: built once here, Spark only when first asked."""

    config: Config
    store: ZkStateStore
    partitioner: Partitioner
    clock: Callable[[], dt.datetime] = utc_now
    fs: WarehouseFileSystem = field(init=False)
    warehouse: Warehouse = field(init=False)
    _spark: SparkStarter = field(init=False)
    _registrar: HiveRegistrar | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.fs = filesystem_for(self.config.warehouse)
        self.warehouse = Warehouse.of(self.config)
        self._spark = SparkStarter(self.config)  # no Python workers warmed: a compaction runs no Spark task

    def registrar(self) -> HiveRegistrar:
        """Start Spark and the Hive client, and create or evolve the tables, as a run does."""
        if self._registrar is None:
            registrar = HiveRegistrar(self._spark.session(), self.config.hive, self.warehouse,
                                      owner=self.store.paths.job)
            registrar.ensure_tables()
            self._registrar = registrar
        return self._registrar
