"""A batch's rollups kept in PostgreSQL (etl.postgres): the seed's transaction, run by the driver
once the batch is REGISTERED and before ZooKeeper commits its offsets.

For each rollup with a target, the database's offsets of the batch's partitions say where it
stands against each range, and so what the transaction holds:
- at the range's start: the range is added (its partial, merged with the batch's others), and
  its offset moves from the start to the end, guarded by `next_offset = start`;
- at the range's end, moved there by this batch: a run that died between the database's commit
  and ZooKeeper's added it already. A batch is one transaction, so then all its ranges are:
  nothing is added twice, and ZooKeeper's commit follows;
- behind the start, or holding no offset of the partition: ZooKeeper committed ranges that the
  database never saw (a rollup whose target was added later, a database restored from a backup,
  a reset that skipped forward). The partials of the ranges between, in the partials table, are
  added in the same transaction: the table's partials are what the database catches up from;
- anything else (past the start, moved by another batch): ZooKeeper moved back under it (a
  reset without --rebuild-rollups) or the database was written by hand. Refused, exit 2, naming
  `etl rollup rebuild`: adding would count rows twice, and a database cannot subtract a min.
"""
from __future__ import annotations

import logging
import posixpath
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Mapping

import pyarrow as pa

from etl import faults
from etl.config import RetryConfig
from etl.errors import PostgresUnavailable, RollupRefused
from etl.job.batch_tables import BatchTable, BatchTables
from etl.model.batch import Batch, BatchKind, OffsetRange
from etl.job.rollup_task import live_partials
from etl.model.naming import FileRange, named_range
from etl.model.rollup_table import PARTIALS_FORMAT, RollupSpec, partial_name
from etl.model.schema import arrow_type
from etl.postgres.positions import OffsetMove, Position, as_rows
from etl.retry import retry_idempotent
from etl.rows.rollup_partials import merged
from etl.sink.file_format import read_columns
from etl.sink.fs import WarehouseFileSystem

if TYPE_CHECKING:  # the client is imported only by a job whose rollups have a target (etl.context.job)
    from etl.postgres.rollup_db import RollupDatabase

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Gap:
    """Offsets of one partition ZooKeeper committed and the database has not: [start, end),
    start None for all before `end`; of the topic's incarnation (etl.model.identity)."""

    topic: str
    partition: int
    incarnation: str
    start: int | None
    end: int

    def holds(self, r: FileRange) -> bool:
        return self._mine(r) and (self.start is None or r.start >= self.start) and r.end <= self.end

    def overlaps(self, r: FileRange) -> bool:
        return self._mine(r) and (self.start is None or r.end > self.start) and r.start < self.end

    def _mine(self, r: FileRange) -> bool:
        return (r.topic, r.partition, r.incarnation) == (self.topic, self.partition, self.incarnation)


@dataclass(frozen=True)
class Plan:
    moves: tuple[OffsetMove, ...]
    gaps: tuple[Gap, ...]


def plan_moves(spec: RollupSpec, batch_id: int, ranges: Iterable[OffsetRange],
               positions: Mapping[tuple[str, int], Position], where: str) -> Plan | None:
    """What the batch's transaction moves and catches up; None when the database holds the batch
    already (this batch moved each offset to its range's end). Raises RollupRefused."""
    ranges = list(ranges)
    done = [r for r in ranges if positions.get((r.topic, r.partition)) == Position(r.end, batch_id)]
    if done and len(done) == len(ranges):
        return None
    moves, gaps = [], []
    for r in ranges:
        found = positions.get((r.topic, r.partition))
        if found is not None and found.next_offset > r.start:
            raise RollupRefused(f"{spec.rollup.describe()}: {where} holds {r.topic}:{r.partition} up to offset "
                                f"{found.next_offset} (batch {found.batch_id}), past the start of batch {batch_id}'s "
                                f"range {r.start}-{r.end}: adding it would count rows twice. ZooKeeper's offsets moved "
                                f"back under the database (etl reset-offsets without --rebuild-rollups?); run `etl "
                                f"rollup rebuild --rollup {spec.rollup.name} --execute`")
        start = None if found is None else found.next_offset
        if start is None or start < r.start:
            gaps.append(Gap(r.topic, r.partition, r.incarnation, start, r.start))
        moves.append(OffsetMove(r.topic, r.partition, None if found is None else found.next_offset, r.end))
    return Plan(tuple(moves), tuple(gaps))


def ahead_of_zookeeper(positions: Mapping[tuple[str, int], Position], committed: Mapping[tuple[str, int], int],
                       opened: Batch | None) -> list[tuple[tuple[str, int], Position]]:
    """The database's offsets past ZooKeeper's committed ones, but those the open batch's own
    transaction moved (a run killed between the two commits)."""
    ends = {(r.topic, r.partition): r.end for r in opened.ranges} if opened is not None else {}
    return [(key, found) for key, found in sorted(positions.items())
            if found.next_offset > committed.get(key, -1)
            and not (opened is not None and found.batch_id == opened.batch_id and ends.get(key) == found.next_offset)]


def refuse_ahead(spec: RollupSpec, positions: Mapping[tuple[str, int], Position],
                 committed: Mapping[tuple[str, int], int], opened: Batch | None, where: str) -> None:
    """Before a batch is planned or resumed: refused, a batch is not planned that could not commit."""
    for key, found in ahead_of_zookeeper(positions, committed, opened)[:1]:
        raise RollupRefused(f"{spec.rollup.describe()}: {where} holds {key[0]}:{key[1]} up to offset "
                            f"{found.next_offset} (batch {found.batch_id}), past ZooKeeper's committed offset "
                            f"{committed.get(key)}: the next batch would count rows twice. ZooKeeper moved back under "
                            f"the database (etl reset-offsets without --rebuild-rollups?), or it was written by hand; "
                            f"run `etl rollup rebuild --rollup {spec.rollup.name} --execute`")


class RollupMirror:
    """Built once per command by its context; `databases`: by rollup name, those with a target."""

    def __init__(self, fs: WarehouseFileSystem, databases: Mapping[str, RollupDatabase], retry: RetryConfig):
        self.fs, self.databases, self.retry = fs, databases, retry

    def apply(self, batch: Batch, tables: BatchTables) -> None:
        """Each rollup's transaction for `batch`; a repair moves no offset, and adds nothing."""
        if batch.kind is BatchKind.REPAIR or not self.databases:
            return
        for spec, table, ranges in self._rollups_of(batch, tables):
            database = self.databases[spec.rollup.name]
            retry_idempotent(self.retry, (PostgresUnavailable,), f"{spec.rollup.describe()} in PostgreSQL",
                             lambda: self._apply(database, spec, table, batch, ranges))
            faults.checkpoint(f"postgres:{spec.rollup.name}")

    def _rollups_of(self, batch: Batch, tables: BatchTables):
        found: dict[str, tuple[RollupSpec, BatchTable, list[OffsetRange]]] = {}
        for r in batch.ranges:
            table = tables.of(r)
            for spec in table.spec.rollups:
                if spec.rollup.name in self.databases:
                    found.setdefault(spec.rollup.name, (spec, table, []))[2].append(r)
        return list(found.values())

    def _apply(self, database: RollupDatabase, spec: RollupSpec, table: BatchTable, batch: Batch,
               ranges: list[OffsetRange]) -> None:
        where = database.target.describe()
        plan = plan_moves(spec, batch.batch_id, ranges, database.positions(spec), where)
        if plan is None:
            log.warning("%s: %s holds batch %d already (a run died between its commit and ZooKeeper's)",
                        spec.rollup.describe(), where, batch.batch_id)
            return
        folder = table.warehouse.partials_dir(spec.partials_table, batch.partition_values)
        paths = [posixpath.join(folder, partial_name(r.file_range.stem)) for r in ranges if r.size > 0]
        caught_up = self._gap_partials(table, spec, plan.gaps)
        if caught_up:
            log.warning("%s: %s catches up %d partials ZooKeeper committed before it saw them",
                        spec.rollup.describe(), where, len(caught_up))
        rows = merged_partials(self.fs, spec, paths + caught_up)
        database.apply(spec, batch.batch_id, plan.moves, as_rows(rows))

    def _gap_partials(self, table: BatchTable, spec: RollupSpec, gaps: tuple[Gap, ...]) -> list[str]:
        """The partials the view reads of the ranges in `gaps`. One that holds offsets both in a gap
        and out of it (folded by `etl compact` with ranges the database holds) is refused: adding it
        would count those twice, leaving it out would lose the rest."""
        found = []
        for path in live_partials(self.fs, table.warehouse, spec.partials_table) if gaps else ():
            r = named_range(posixpath.basename(path))
            if r is None:
                continue
            if any(gap.holds(r) for gap in gaps):
                found.append(path)
            elif any(gap.overlaps(r) for gap in gaps):
                raise RollupRefused(f"{spec.rollup.describe()}: the database lacks offsets of {r.topic}:{r.partition} "
                                    f"that ZooKeeper committed, and the partial {path} holds some of them folded "
                                    f"with others it has (etl compact folded them): it cannot catch up from the "
                                    f"partials. Run `etl rollup rebuild --rollup {spec.rollup.name} --execute`, "
                                    f"which makes its rows and offsets there anew")
        return found


def merged_partials(fs: WarehouseFileSystem, spec: RollupSpec, paths: list[str]) -> pa.Table:
    """The partials at `paths`, merged into one row per group, in the partials table's types."""
    schema = pa.schema([pa.field(c.name, arrow_type(c.hive_type)) for c in spec.columns])
    tables = [read_columns(fs, path, PARTIALS_FORMAT, schema.names).cast(schema) for path in paths]
    if not tables:
        return schema.empty_table()
    return merged(tables, spec.rollup.group_by, spec.rollup.aggregates).select(schema.names).cast(schema)
