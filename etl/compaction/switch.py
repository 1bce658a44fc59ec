"""The metastore side of a compaction: point a Hive partition at its merged folder, and refuse
to delete files from the folder Hive reads the partition from now."""
from __future__ import annotations

import posixpath
from typing import Callable

from etl.errors import HiveError
from etl.hive.registrar import HiveRegistrar
from etl.model.compaction import CompactionPlan
from etl.model.naming import partition_values
from etl.sink.warehouse import Warehouse, same_location


def plan_folder(warehouse: Warehouse, plan: CompactionPlan, relative: str) -> str:
    """A folder of `plan` (its source or its target, relative to the table's root) in the warehouse."""
    return posixpath.join(warehouse.root(plan.table), relative)


class PartitionSwitch:
    def __init__(self, registrar_of: Callable[[str | None], HiveRegistrar]):
        """`registrar_of(plan.table_name)`: the client of the plan's table, built (and Spark
        started) on first call: a run with no compaction under way never starts it for
        compaction's sake (etl.compaction.tables)."""
        self._registrar_of = registrar_of

    def point_at_target(self, plan: CompactionPlan, warehouse: Warehouse) -> None:
        """Point the Hive partition at the new folder: once, and idempotent on a replay."""
        registrar = self._registrar_of(plan.table_name)
        registered = registrar.location(plan.table, plan.partition)
        source_uri = warehouse.hive_uri(plan_folder(warehouse, plan, plan.source))
        target_uri = warehouse.hive_uri(plan_folder(warehouse, plan, plan.target))
        if registered is not None and not (same_location(registered, source_uri)
                                           or same_location(registered, target_uri)):
            raise HiveError(f"compaction {plan.compaction_id}: Hive partition {plan.partition} of the "
                            f"{plan.label} table is registered at {registered}, neither at {source_uri} where "
                            f"its files were nor at {target_uri} where they are merged; it was moved by hand. "
                            f"Point it back with ALTER TABLE ... PARTITION (...) SET LOCATION '{source_uri}' and run "
                            f"again")
        registrar.set_location(plan.table, plan.partition, target_uri)

    def refuse_if_hive_reads(self, plan: CompactionPlan, warehouse: Warehouse, relative: str, deleting: str) -> None:
        """Files are never deleted from the folder the metastore reads the partition from now
        (asked at this moment, not remembered): an operator may have pointed the partition back
        at its old folder by hand, say restoring a backup, and Hive would show no rows."""
        registered = self._registrar_of(plan.table_name).location(plan.table, plan.partition)
        folder = warehouse.hive_uri(plan_folder(warehouse, plan, relative))
        if registered is None or not _within(folder, registered):
            return
        target_uri = warehouse.hive_uri(plan_folder(warehouse, plan, plan.target))
        if relative == plan.target:
            expected = warehouse.hive_uri(plan_folder(warehouse, plan, plan.source))
            remedy = (f"its inputs are gone from {expected}, so the partition should read {expected} again: put the "
                      f"files back there, or point the partition at the folder that holds them, and run again")
        else:
            expected = target_uri
            remedy = (f"{target_uri} holds every row of {registered} merged: point the partition at it with ALTER "
                      f"TABLE ... PARTITION ({_sql_spec(plan.partition)}) SET LOCATION '{target_uri}' and run "
                      f"again, which then deletes the replaced files")
        raise HiveError(f"compaction {plan.compaction_id} of the {plan.label} table will not {deleting}: Hive "
                        f"reads partition {plan.partition} from {registered}, where those files are, but the "
                        f"compaction expected it at {expected} (it was pointed there by hand?). Nothing was "
                        f"deleted. Remedy: {remedy}")


def _sql_spec(partition: str) -> str:
    return ", ".join(f"{key}='{value}'" for key, value in partition_values(partition).items())


def _within(folder: str, location: str) -> bool:
    """Whether `folder` is `location` or below it (a partition pointed at a parent folder)."""
    while True:
        if same_location(folder, location):
            return True
        parent = posixpath.dirname(folder.rstrip("/"))
        if parent == folder.rstrip("/") or parent.endswith(":/") or parent.endswith(":"):
            return False
        folder = parent
