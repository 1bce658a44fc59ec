"""A metastore in a dict, for the Spark-free unit tests of compaction (tests/unit/test_compaction_tables.py):
each table's partitions and their locations, with the three calls a compaction makes of a
HiveRegistrar (`partitions`, `location`, `set_location`). `MetastoreContext` is a command's real
context (etl.context.command) on the memory store and a local folder, whose Hive clients are these.
The end-to-end proof with the real metastore stays in tests/integration/test_compaction*.py."""
from __future__ import annotations

from dataclasses import dataclass, field

from etl.context.command import CommandContext
from etl.errors import HiveError
from etl.model.compaction import TableKind


@dataclass
class FakeMetastore:
    locations: dict[tuple[str, str], str] = field(default_factory=dict)  # (table, partition) -> location
    moved: list[tuple[str, str, str]] = field(default_factory=list)  # every set_location, in order

    def client(self, main: str | None, rejected: str) -> "FakeTable":
        return FakeTable(self, main, rejected)


@dataclass
class FakeTable:
    """One HiveRegistrar's view: its MAIN table (None for a routed job's own registrar) and the rejected one."""

    metastore: FakeMetastore
    main: str | None
    rejected: str

    def _table(self, kind: TableKind) -> str:
        if kind is TableKind.REJECTED:
            return self.rejected
        if self.main is None:
            raise HiveError("a routed job's own registrar has no one table (a bug the test catches)")
        return self.main

    def partitions(self, kind: TableKind) -> dict[str, str]:
        table = self._table(kind)
        return {p: where for (t, p), where in sorted(self.metastore.locations.items()) if t == table}

    def location(self, kind: TableKind, partition: str) -> str | None:
        return self.metastore.locations.get((self._table(kind), partition))

    def set_location(self, kind: TableKind, partition: str, location: str) -> None:
        self.metastore.locations[(self._table(kind), partition)] = location
        self.metastore.moved.append((self._table(kind), partition, location))


class MetastoreContext(CommandContext):
    """A command's context whose Hive clients are the fake metastore's; `existing` records the
    routed tables asked for, once each (the real context caches them too)."""

    def __init__(self, *args, metastore: FakeMetastore, **kwargs):
        super().__init__(*args, **kwargs)
        self.metastore, self.existing = metastore, []

    def registrar(self):
        return self.metastore.client(self.config.hive.table, self.config.hive.rejected_table)

    def existing_table(self, name: str):
        if name not in self.existing:
            self.existing.append(name)
        return self.metastore.client(name, self.config.hive.rejected_table)
