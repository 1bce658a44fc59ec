"""A compaction: the write-ahead plan that merges one Hive partition's files into few.

PLANNED -> WRITTEN -> SWITCHED, then gone. The plan is stored in ZooKeeper before any file is
written; the merged files go to a new folder, the Hive partition is pointed at it in one
metastore call, and the replaced files are deleted by a later run, after a grace period for
the queries still reading them (etl.compaction carries it out; this module is its data,
stored by etl.state and read by the warehouse and the registrar below it).

The new folder is `<table>/_compacted/<dt=…/hour=…>/c<id>`: the partition it holds is in its
path, the compaction's id (a ZooKeeper sequence number) makes it unique, so two compactions of
one partition never share a folder, and the leading `_` keeps it out of every listing of the
table's root by Hive, Spark or MSCK REPAIR: a reader that discovers partitions from folders
sees the old files, never both.
"""
from __future__ import annotations

import posixpath
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Mapping

from etl.errors import StateConflict
from etl.model.naming import name_stem, named_range
from etl.model.rollup_table import partial_name

COMPACTED_FOLDER = "_compacted"


class CompactionState(str, Enum):
    PLANNED = "PLANNED"  # plan stored; merged files being written to the new folder
    WRITTEN = "WRITTEN"  # every merged file is in the new folder; Hive still reads the old one
    SWITCHED = "SWITCHED"  # Hive reads the new folder; the old files wait for their grace period


class TableKind(str, Enum):
    MAIN = "main"
    REJECTED = "rejected"


def compacted_folder(partition: str, compaction_id: int) -> str:
    """The new folder of a compacted partition, relative to its table's root."""
    return f"{COMPACTED_FOLDER}/{partition}/c{compaction_id:010d}"


def compaction_of_folder(folder: str) -> int | None:
    """The id of the compaction that made a compacted folder (or a path in one: its folder is
    taken), or None if it is not one."""
    name = posixpath.basename(folder)
    parts = folder.split("/")
    if COMPACTED_FOLDER not in parts[:-1] or len(name) != 11 or name[0] != "c" or not name[1:].isdigit():
        return None
    return int(name[1:])


def partition_of_folder(folder: str) -> str | None:
    """The partition path a compacted folder holds, or None if `folder` is not one."""
    if not folder.startswith(COMPACTED_FOLDER + "/"):
        return None
    return posixpath.dirname(folder[len(COMPACTED_FOLDER) + 1:]) or None


@dataclass(frozen=True)
class InputFile:
    """A file a compaction replaces: its name, size and rows, and the offset ranges it holds
    (one for a batch's file, several for a file an earlier compaction merged)."""

    name: str
    size: int
    rows: int
    ranges: tuple[tuple[int, int], ...]

    @property
    def kafka_partition(self) -> tuple[str, int, str]:
        """The Kafka partition and the topic's incarnation (etl.model.identity) whose offsets it holds."""
        parsed = named_range(self.name)
        assert parsed is not None, f"{self.name} is not a committed file's name"
        return parsed.topic, parsed.partition, parsed.incarnation

    def to_json(self) -> list:
        return [self.name, self.size, self.rows, [list(r) for r in self.ranges]]

    @classmethod
    def from_json(cls, raw: list) -> "InputFile":
        name, size, rows, ranges = raw
        return cls(name, int(size), int(rows), tuple((int(a), int(b)) for a, b in ranges))


@dataclass(frozen=True)
class OutputFile:
    name: str
    inputs: tuple[str, ...]  # in offset order

    def to_json(self) -> list:
        return [self.name, list(self.inputs)]

    @classmethod
    def from_json(cls, raw: list) -> "OutputFile":
        return cls(raw[0], tuple(raw[1]))


@dataclass(frozen=True)
class PartialsFold:
    """A rollup's partials of the plan's partition, folded with the data files they were computed
    from: one partial per merged file, named as the merged file is (etl.model.rollup_table), in the
    partials table's own new folder (the plan's `target`, under the partials table's root), which
    the metastore is pointed at with the data partition. The fold is recorded whole, merge
    functions and all, so that a compaction under way is carried on from ZooKeeper alone."""

    rollup: str  # its [rollup <name>] section
    table: str  # its partials table
    source: str  # the partials partition's folder now, relative to the partials table's root
    keys: tuple[str, ...]  # the group's columns
    merges: tuple[tuple[str, str], ...]  # each aggregate's column and the function that merges it (sum, min, max)
    outputs: tuple[str, ...]  # the merged files whose partials it folds: those of its route's topics

    def partials(self, plan: "CompactionPlan") -> list[tuple[str, tuple[str, ...]]]:
        """Each folded partial's name, with the names of the partials it folds (its data inputs')."""
        return [(partial_of(output.name), tuple(partial_of(name) for name in output.inputs))
                for output in plan.outputs if output.name in self.outputs]

    def inputs(self, plan: "CompactionPlan") -> list[str]:
        return [name for _, inputs in self.partials(plan) for name in inputs]

    def to_json(self) -> dict:
        return {"rollup": self.rollup, "table": self.table, "source": self.source, "keys": list(self.keys),
                "merges": [list(m) for m in self.merges], "outputs": list(self.outputs)}

    @classmethod
    def from_json(cls, raw: dict) -> "PartialsFold":
        return cls(raw["rollup"], raw["table"], raw["source"], tuple(raw["keys"]),
                   tuple((str(a), str(b)) for a, b in raw["merges"]), tuple(raw["outputs"]))


def partial_of(data_file: str) -> str:
    """The partial of a committed file (a batch's or a merged one): named by the file, as Parquet."""
    return partial_name(name_stem(data_file))


@dataclass(frozen=True)
class CompactionPlan:
    compaction_id: int
    table: TableKind
    partition: str  # dt=2026-11-22/hour=13
    source: str  # the folder Hive reads now, relative to the table's root
    target: str  # the new folder, relative to the table's root
    inputs: tuple[InputFile, ...]
    outputs: tuple[OutputFile, ...]
    planned_at: str
    planned_by: str
    state: CompactionState = CompactionState.PLANNED
    switched_at: str | None = None
    marker: bool = False  # the source holds `_SUCCESS`: the target gets one too, before the switch
    # A routed job's table (its Hive name); None: a one-table job's own table, or the job's rejected
    # table, which every route shares. Its JSON key is written only when set, so a one-table job's
    # plans are byte for byte what they were before routes could be compacted.
    table_name: str | None = None
    # Its merged files record their checksums (`etl.checksums`, etl.sink.checksums): every plan this
    # version makes. A record without the key is an older version's, whose files may have none.
    checksums: bool = False
    # The partials of the table's rollups, folded with it; the JSON key is written only when set.
    partials: tuple[PartialsFold, ...] = ()

    @property
    def label(self) -> str:
        """The table in messages: its Hive name, or `main`/`rejected`."""
        return self.table_name or self.table.value

    @property
    def rows(self) -> int:
        return sum(f.rows for f in self.inputs)

    @property
    def input_bytes(self) -> int:
        return sum(f.size for f in self.inputs)

    def input(self, name: str) -> InputFile:
        return next(f for f in self.inputs if f.name == name)

    def ranges_of(self, output: OutputFile) -> list[tuple[int, int]]:
        return sorted(r for name in output.inputs for r in self.input(name).ranges)

    def advanced(self, to: CompactionState, **changes) -> "CompactionPlan":
        order = list(CompactionState)
        if order.index(to) != order.index(self.state) + 1:
            raise StateConflict(f"compaction {self.compaction_id} cannot go from {self.state.value} to {to.value}")
        return replace(self, state=to, **changes)

    def describe(self) -> str:
        return (f"compaction {self.compaction_id} of {self.label} partition {self.partition}: "
                f"{len(self.inputs)} files ({self.input_bytes / 1e6:.1f} MB, {self.rows} rows) into "
                f"{len(self.outputs)} in {self.target}, {self.state.value}")

    def to_json(self) -> dict:
        return {"id": self.compaction_id, "table": self.table.value, "partition": self.partition,
                "source": self.source, "target": self.target, "inputs": [f.to_json() for f in self.inputs],
                "outputs": [f.to_json() for f in self.outputs], "planned_at": self.planned_at,
                "planned_by": self.planned_by, "state": self.state.value, "switched_at": self.switched_at,
                "marker": self.marker, **({"table_name": self.table_name} if self.table_name else {}),
                **({"checksums": True} if self.checksums else {}),
                **({"partials": [f.to_json() for f in self.partials]} if self.partials else {})}

    @classmethod
    def from_json(cls, raw: dict) -> "CompactionPlan":
        return cls(int(raw["id"]), TableKind(raw["table"]), raw["partition"], raw["source"], raw["target"],
                   tuple(InputFile.from_json(f) for f in raw["inputs"]),
                   tuple(OutputFile.from_json(f) for f in raw["outputs"]), raw["planned_at"], raw["planned_by"],
                   CompactionState(raw["state"]), raw.get("switched_at"), bool(raw.get("marker")),
                   raw.get("table_name"), raw.get("checksums") is True,
                   tuple(PartialsFold.from_json(f) for f in raw.get("partials", ())))


@dataclass(frozen=True)
class Relocations:
    """The partitions whose files are no longer in their default folder (`<root>/dt=…/hour=…`):
    partition path -> folder relative to the table's root, for the table and its rejected one.

    A routed job's tables, and the rollups' partials tables (a compaction moves their partitions
    with its data's: PartialsFold), each have their own map in `tables` (by Hive name), stored apart from
    `main` and `rejected` (etl.state.compaction_records): `to_json` is the one-table encoding and
    never holds them. `for_table` makes a table's map the `main` of that table's view."""

    main: Mapping[str, str] = field(default_factory=dict)
    rejected: Mapping[str, str] = field(default_factory=dict)
    tables: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def of(self, table: TableKind) -> Mapping[str, str]:
        return self.main if table is TableKind.MAIN else self.rejected

    def folder(self, table: TableKind, partition: str) -> str:
        return self.of(table).get(partition, partition)

    def moved(self, table: TableKind, partition: str, folder: str, name: str | None = None) -> "Relocations":
        """With `name` (a routed table's, `table` MAIN), only that table's map moves."""
        if name is not None:
            return replace(self, tables={**self.tables, name: {**self.tables.get(name, {}), partition: folder}})
        changed = {**self.of(table), partition: folder}
        return replace(self, main=changed) if table is TableKind.MAIN else replace(self, rejected=changed)

    def for_table(self, name: str) -> "Relocations":
        """A routed table's view: its own map as `main`; the shared rejected map and `tables` kept."""
        return replace(self, main=self.tables.get(name, {}))

    def counts(self) -> dict:
        """Compacted partitions per table, for `etl status`: `tables` only when a routed table has some."""
        counts: dict = {"main": len(self.main), "rejected": len(self.rejected)}
        if self.tables:
            counts["tables"] = {name: len(folders) for name, folders in sorted(self.tables.items())}
        return counts

    def to_json(self) -> dict:
        return {"main": dict(sorted(self.main.items())), "rejected": dict(sorted(self.rejected.items()))}

    @classmethod
    def from_json(cls, raw: dict) -> "Relocations":
        return cls(dict(raw.get("main", {})), dict(raw.get("rejected", {})))
