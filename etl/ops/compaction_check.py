"""What `etl verify` checks of compactions (etl.model.compaction).

A file no partition reads from (superseded) is expected only while a compaction under way
accounts for it: an input waiting for its grace period, or a merged file not yet switched to.
Any other is left over, outside every query, and named. While a compaction is between the
metastore switch and its ZooKeeper record, the partition may be registered at either folder.
A plan of a routed job's table names it, and is looked for in that table's folders only.
"""
from __future__ import annotations

import posixpath

from etl.model.compaction import CompactionPlan, CompactionState, TableKind
from etl.ops.coverage import Problem
from etl.ops.inventory import Inventory
from etl.sink.warehouse import Warehouse, same_location


def check_superseded(inventory: Inventory, compactions: list[CompactionPlan], warehouse: Warehouse) -> list[Problem]:
    expected = set()
    for plan in compactions:
        root = warehouse.view(plan.table_name).root(plan.table)
        expected |= {posixpath.join(root, plan.source, f.name) for f in plan.inputs}
        if plan.state is not CompactionState.SWITCHED:
            expected |= {posixpath.join(root, plan.target, f.name) for f in plan.outputs}
    left = sorted(set(inventory.superseded) - expected)
    if not left:
        return []
    return [Problem("superseded_file", "warehouse", f"{len(left)} files are in no partition's current folder and no "
                    f"compaction under way accounts for them: no query reads them (e.g. {', '.join(left[:3])})",
                    "they are copies of rows the table holds in its compacted folders, or files moved by hand: "
                    "check, then delete them or move them out of the warehouse")]


def switching(problems: list[Problem], kind: TableKind, name: str | None, compactions: list[CompactionPlan],
              locations: dict[str, str], warehouse: Warehouse) -> list[Problem]:
    """`problems` without the wrong_location of a partition whose compaction switched the
    metastore and died before ZooKeeper recorded it: the next run records it. `name`: a routed
    job's table (its plans name it), else None; `warehouse`: that table's view."""
    root = warehouse.root(kind)
    mid_switch = {plan.partition for plan in compactions
                  if plan.table is kind and plan.table_name == name and plan.state is not CompactionState.SWITCHED
                  and plan.partition in locations
                  and same_location(locations[plan.partition], warehouse.hive_uri(posixpath.join(root, plan.target)))}
    return [p for p in problems if not (p.kind == "wrong_location" and p.where in mid_switch)]
