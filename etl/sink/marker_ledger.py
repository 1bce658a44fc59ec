"""The marker ledger: the partitions still awaiting `_SUCCESS`, as the newest batch's header lists
them (Batch.extra["markers"]; etl.sink.markers says how it moves and why it is exactly-once).

An entry is a partition of the one-table job's table, or of one of a routed job's tables: a
routed batch plans one partition into each table it writes, so each table's partition awaits its
own marker. A one-table job's entries are the partition values, as they always were; a routed
job's add `table` (never a partition column: those are dt and hour, etl.model.partitioning).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable, Mapping, Sequence

from etl.model.shape import ONE_TABLE
from etl.errors import EtlError
from etl.model.batch import Batch
from etl.model.naming import partition_path
from etl.model.partitioning import Partitioner, Window, padded_values

LEDGER_KEY = "markers"  # the batch header's extra[...] that holds the ledger
TABLE_KEY = "table"  # a routed job's entry: the table whose partition it is
LATE_KEPT = 10  # late-data records kept in the ledger; the count covers all of them
PartitionKey = tuple[tuple[str, str], ...]  # partition values as a hashable, ordered tuple


class MarkerError(EtlError):
    """A `_SUCCESS` marker could not be written; the data it vouches for is committed."""


def window_of(partitioner: Partitioner, values: Mapping[str, str]) -> Window:
    """The partition's time window (etl.model.partitioning), or a MarkerError naming it."""
    try:
        return partitioner.window(values)
    except (KeyError, ValueError) as exc:
        raise MarkerError(f"partition {partition_path(dict(values))}: cannot read its time window: {exc}") from exc


def partition_key(values: Mapping[str, str]) -> PartitionKey:
    return tuple((name, str(value)) for name, value in values.items())


@dataclass(frozen=True)
class Awaiting:
    """A partition awaiting its marker, in the one-table job's table or in a routed job's `table`."""

    partition: PartitionKey
    table: str = ""  # "": the one-table job's table

    @classmethod
    def from_json(cls, raw: Mapping[str, str]) -> "Awaiting":
        # A partition named before dt was zero-padded (dt=1-01-02) is listed as its padded name.
        values = {name: value for name, value in raw.items() if name != TABLE_KEY}
        return cls(partition_key(padded_values(values)), raw.get(TABLE_KEY, ""))

    def to_json(self) -> dict:
        return {**dict(self.partition), **({TABLE_KEY: self.table} if self.table else {})}

    @property
    def values(self) -> dict[str, str]:
        return dict(self.partition)

    def describe(self) -> str:
        path = partition_path(self.values)
        return f"{self.table}/{path}" if self.table else path


@dataclass(frozen=True)
class Ledger:
    """What the newest batch's header says about markers."""

    unmarked: tuple[Awaiting, ...] = ()  # planned (or committed) partitions without a marker yet
    late_count: int = 0  # batches ever planned into a partition that already had its marker
    late: tuple[dict, ...] = ()  # the newest LATE_KEPT of them: batch_id, partition, planned_at, planned_by

    @classmethod
    def of(cls, batch: Batch | None) -> "Ledger":
        raw = (batch.extra.get(LEDGER_KEY) if batch is not None else None) or {}
        return cls(tuple(Awaiting.from_json(v) for v in raw.get("unmarked", [])), int(raw.get("late_count", 0)),
                   tuple(raw.get("late", [])))

    def to_json(self) -> dict:
        return {"unmarked": [a.to_json() for a in self.unmarked], "late_count": self.late_count,
                "late": list(self.late)}

    def adding(self, values: Mapping[str, str], partitioner: Partitioner,
               tables: Sequence[str] = ONE_TABLE) -> "Ledger":
        """The partition `values` of each of `tables` listed too, the list oldest window first."""
        entries = set(self.unmarked) | {Awaiting(partition_key(values), table) for table in tables}
        return replace(self, unmarked=tuple(sorted(entries, key=lambda a: (window_of(partitioner, a.values).start,
                                                                            a.table))))

    def without(self, gone: Iterable[Awaiting]) -> "Ledger":
        dropped = set(gone)
        return replace(self, unmarked=tuple(a for a in self.unmarked if a not in dropped))

    def with_late(self, record: dict) -> "Ledger":
        return replace(self, late_count=self.late_count + 1, late=(self.late + (record,))[-LATE_KEPT:])
