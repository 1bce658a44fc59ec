"""The tables a command inspects: a one-table job's table, or each table a routed job has loaded
into (its committed topics' tables, as the config routes them now, and as the routes `etl bind`
retired routed them: a topic moved by --move-loaded has its records in both) and each table its
open batch writes, each with its folders (etl.sink.warehouse.Warehouse.for_table), and what their
folders hold (`take_job_inventory`). A table that holds nothing any more has an empty inventory."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from etl.config import Config
from etl.model.shape import JobTable, shape_of
from etl.model.batch import Batch
from etl.model.compaction import TableKind
from etl.model.route_binding import JobBinding
from etl.model.binding import format_refusal
from etl.ops.coverage import Problem
from etl.ops.inventory import Inventory, merged, take_inventory
from etl.ops.parts import check_parts, check_split_parts
from etl.sink.fs import WarehouseFileSystem
from etl.sink.manifest import RangeManifest, list_manifests
from etl.sink.warehouse import Warehouse
from etl.state.protocols import StateStore


def job_tables(config: Config, warehouse: Warehouse, committed_topics: Iterable[str], open_batch: Batch | None,
               bound: JobBinding | None = None) -> list[JobTable]:
    """The tables a command inspects. A config that names another file format than the job's
    tables have is refused here too: read in the wrong format, every file would look missing
    (as `etl run` refuses it: etl.model.binding)."""
    if bound is not None and bound.file_format is not config.hive.format:
        raise format_refusal(f"job {config.job.name}'s tables are", bound.file_format.value, config.hive.format,
                             "[hive] format")
    return shape_of(config).held_tables(warehouse, lambda: committed_topics, open_batch, lambda: bound)


@dataclass(frozen=True)
class JobInventory:
    """What the folders of a job's tables hold."""
    by_table: dict[str, Inventory]  # each table's own files, by table name
    whole: Inventory  # every table's files and the rejected table's, as one
    manifests: list[RangeManifest]  # each table's, and a routed job's split ranges' (in its rejected table)

    def part_problems(self, open_batch: Batch | None) -> list[Problem]:
        """Ranges whose files do not match their manifests (etl.ops.parts), a split's across tables."""
        return check_parts(self.whole, self.manifests, open_batch) + \
            check_split_parts(self.by_table, self.manifests, open_batch)


def take_job_inventory(fs: WarehouseFileSystem, warehouse: Warehouse,
                       tables: list[JobTable]) -> JobInventory:
    """`warehouse`: the job's (its rejected table's folders); `tables`: job_tables'."""
    by_table = {name: take_inventory(fs, view, (TableKind.MAIN,)) for name, view in tables}
    whole = merged([*by_table.values(), take_inventory(fs, warehouse, (TableKind.REJECTED,))])
    # a split range's manifests are in the rejected table (a one-table job has none there)
    roots = dict.fromkeys([*(view.table_root for _, view in tables), warehouse.rejected_root])
    return JobInventory(by_table, whole, [m for root in roots for m in list_manifests(fs, root)])


def held_by_job(fs: WarehouseFileSystem, config: Config, store: StateStore, warehouse: Warehouse) -> JobInventory:
    """What the tables the job's state names hold (job_tables, from its committed topics, its open
    batch and its binding); `warehouse`: the job's, relocations applied."""
    opened = store.batches.open_batch()
    tables = job_tables(config, warehouse, {topic for topic, _ in store.offsets.committed_offsets()},
                        opened[0] if opened else None, store.operator.binding())
    return take_job_inventory(fs, warehouse, tables)
