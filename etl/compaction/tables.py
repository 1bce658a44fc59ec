"""The tables a compaction acts on, each through its own folders and metastore client.

A one-table job's are its table and its rejected table (ONE_TABLE). A job with [route] sections
has one entry per table its topics were loaded into, by Hive name, and its rejected table once:
every route shares it, so it is compacted once whatever the number of routes. A plan records its
table's name (etl.model.compaction), so a compaction under way is carried on through its own
table's view and client from ZooKeeper alone: neither the config's routes nor `--table` decide it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from etl.hive.registrar import HiveRegistrar
from etl.model.compaction import Relocations, TableKind
from etl.sink.warehouse import Warehouse


@dataclass(frozen=True)
class CompactedTable:
    kind: TableKind
    name: str | None = None  # a routed job's table; None: a one-table job's own, or the job's rejected table

    @property
    def label(self) -> str:
        return self.name or self.kind.value


ONE_TABLE = (CompactedTable(TableKind.MAIN), CompactedTable(TableKind.REJECTED))


class TableViews:
    """Each table's Warehouse view (with the relocations as last read) and metastore client.
    `registrar` is the job's (a one-table job's table, and the rejected table): it starts Spark on
    first call, so a run with no compaction under way never starts it. `existing(name)` is a routed
    table's: the table is neither created nor evolved, only its owner checked (etl.context.command)."""

    def __init__(self, warehouse: Warehouse, registrar: Callable[[], HiveRegistrar],
                 existing: Callable[[str], HiveRegistrar]):
        self._warehouse, self._registrar, self._existing = warehouse, registrar, existing

    def relocated(self, relocations: Relocations) -> None:
        self._warehouse = self._warehouse.with_relocations(relocations)

    def warehouse(self, name: str | None) -> Warehouse:
        return self._warehouse.view(name)

    def registrar(self, name: str | None) -> HiveRegistrar:
        return self._registrar() if name is None else self._existing(name)
