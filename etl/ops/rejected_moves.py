"""Rejected records that a move took out of the tables and no rewrite put back (`missing_rejected`).

Not every range has a rejected file (only one with a record that could not be loaded), so the
walk of etl.ops.coverage cannot tell a rejected file that is gone from one that never was. What
can: ZooKeeper's `moved_aside` events (etl.model.events), which name every file `etl recover`
moved out of the table. A range of a rejected file moved out (each range its footer lists, for
a merged one: etl.compaction.merge) had rejected records. Unless the same or a later move took
the range's main files out too (then the range was rewritten whole, and its rewrite says what it
rejects now), a rejected file of the range must be in the table again, as long as the range is
committed and no recorded skip, reset or accepted loss explains it. Releases before this check
moved a merged rejected file out and rewrote only the range that was lost, which left the other
ranges' rejected records under `_etl_moved_aside` alone.
"""
from __future__ import annotations

import posixpath
from collections import defaultdict
from dataclasses import dataclass

from etl.compaction.merge import read_facts
from etl.model.events import Event, MovedAside, Reset, explained_jumps
from etl.model.naming import FileRange, format_of_name, named_range
from etl.ops.coverage import Problem, unexplained
from etl.ops.inventory import Inventory
from etl.sink.fs import WarehouseFileSystem
from etl.sink.warehouse import Warehouse
from etl.state.znodes import CommittedOffset


@dataclass(frozen=True)
class MovedRejected:
    range: FileRange
    source: str  # where the rejected file was in the table
    target: str  # where it is kept, under _etl_moved_aside

    @property
    def where(self) -> str:
        return f"{self.range.topic}[{self.range.partition}] [{self.range.start}, {self.range.end})"


def check_moved_rejected(fs: WarehouseFileSystem, warehouse: Warehouse, inventory: Inventory,
                         committed: dict[tuple[str, int], CommittedOffset], events: list[Event]) -> list[Problem]:
    return [Problem("missing_rejected", m.where, f"the rejected records of this range were in {m.source}, which "
                    f"`etl recover` moved out of the table (it is kept at {m.target}) without rewriting the range: "
                    f"no rejected file of the range is in the table now",
                    "run `etl recover`: it moves the range's main files out too and rewrites the range whole from "
                    "Kafka while Kafka still holds it")
            for m in missing_rejected(fs, warehouse, inventory, committed, events)]


def stale_ranges(fs: WarehouseFileSystem, warehouse: Warehouse, inventory: Inventory,
                 committed: dict[tuple[str, int], CommittedOffset], events: list[Event]) -> set[FileRange]:
    """The main files' ranges that hold offsets of a `missing_rejected` range: `etl recover`
    rewrites them whole."""
    missing = missing_rejected(fs, warehouse, inventory, committed, events)
    return {f.range for f in inventory.files for m in missing if _overlap(f.range, m.range)}


def missing_rejected(fs: WarehouseFileSystem, warehouse: Warehouse, inventory: Inventory,
                     committed: dict[tuple[str, int], CommittedOffset], events: list[Event]) -> list[MovedRejected]:
    jumps = explained_jumps(events)
    rejected, main = defaultdict(list), defaultdict(list)
    for f in inventory.rejected:
        rejected[(f.range.topic, f.range.partition)].append(f.range)
    for f in inventory.files:
        main[(f.range.topic, f.range.partition)].append(f.range)
    found = []
    for m in _moved_alone(fs, warehouse.rejected_root, events):
        key, r = (m.range.topic, m.range.partition), m.range
        offset = committed.get(key)
        if offset is None or not unexplained(r.topic, r.partition, r.start, min(r.end, offset.value), jumps):
            continue  # not committed (a reset moved it back), or its loss is on the record
        if any(_overlap(r, other) for other in rejected[key]):
            continue
        if any(_overlap(r, other) for other in main[key]):  # else a gap: the walk names it, recover rewrites it
            found.append(m)
    return found


def _moved_alone(fs: WarehouseFileSystem, rejected_root: str, events: list[Event]) -> list[MovedRejected]:
    """Each range of a rejected file moved out whose main files stayed in the table, then and after."""
    pending: dict[FileRange, MovedRejected] = {}
    for event in events:
        moves = event.moves if isinstance(event, MovedAside) else event.moved_aside if isinstance(event, Reset) else ()
        rejected = [(source, target) for source, target in moves if _under(source, rejected_root)]
        main = [r for source, target in moves if not _under(source, rejected_root) for r in _ranges(fs, source, target)]
        pending = {r: m for r, m in pending.items() if not any(_overlap(r, other) for other in main)}
        if not isinstance(event, MovedAside):
            continue  # a reset's files are loaded again whole by the next run
        for source, target in rejected:
            for r in _ranges(fs, source, target):
                if not any(_overlap(r, other) for other in main):
                    pending.setdefault(r, MovedRejected(r, source, target))
    return sorted(pending.values(), key=lambda m: (m.range.topic, m.range.partition, m.range.start, m.range.end))


def _ranges(fs: WarehouseFileSystem, source: str, target: str) -> list[FileRange]:
    """The ranges a moved file held: its footer's, for a merged one, read from where it is kept;
    its name's when that copy is gone or unreadable. [] for a manifest."""
    name = posixpath.basename(source)
    named, file_format = named_range(name), format_of_name(name)
    if named is None or file_format is None:
        return []
    try:
        ranges = read_facts(fs, target, file_format).ranges
    except Exception:  # deleted from _etl_moved_aside, or the unreadable file it was moved out as
        ranges = None
    return [FileRange(named.topic, named.partition, a, b, named.incarnation)
            for a, b in ranges or [(named.start, named.end)]]


def _under(path: str, root: str) -> bool:
    return path.startswith(root.rstrip("/") + "/")


def _overlap(a: FileRange, b: FileRange) -> bool:
    return ((a.topic, a.partition, a.incarnation) == (b.topic, b.partition, b.incarnation)
            and a.start < b.end and b.start < a.end)
