"""`etl compact`, and the same step at the end of `etl run` ([compaction] after_run): finish the
compactions under way, then plan and carry out new ones (etl.compaction.compactor,
etl.compaction.choice).

The caller hands in a CompactionHost: its command's context (etl.context), which for `etl compact`
has no Kafka client and no writer spec (etl.ops.compact), and the tables to look at (a routed
job's: etl.compaction.tables; etl.ops.compact chooses them). The caller holds the job lock.
No batch may be open: its files would be written into a folder the compaction is replacing.
`etl run` and `etl recover` complete an open batch first.
"""
from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass, field, replace
from typing import Callable, Protocol

from etl import faults
from etl.compaction.choice import Choice, CompactionChooser
from etl.compaction.compactor import Compactor
from etl.compaction.records import CompactionStore
from etl.compaction.tables import ONE_TABLE, CompactedTable, TableViews
from etl.config import Config
from etl.errors import StateConflict
from etl.hive.registrar import HiveRegistrar
from etl.model.compaction import CompactionPlan, TableKind
from etl.model.partitioning import Partitioner
from etl.sink.fs import WarehouseFileSystem
from etl.sink.warehouse import Warehouse

log = logging.getLogger(__name__)


class CompactionHost(Protocol):
    """What a compaction needs from the command that runs it, and nothing of a batch: whether
    one is open is the store's to say."""

    @property
    def config(self) -> Config: ...

    @property
    def store(self) -> CompactionStore: ...

    @property
    def fs(self) -> WarehouseFileSystem: ...

    @property
    def warehouse(self) -> Warehouse: ...

    @property
    def partitioner(self) -> Partitioner: ...

    @property
    def clock(self) -> Callable[[], dt.datetime]: ...

    def registrar(self) -> HiveRegistrar:
        """The Hive client, its tables ensured: Spark starts on the first call."""

    def existing_table(self, name: str) -> HiveRegistrar:
        """A routed job's table's Hive client: neither created nor evolved, its owner checked."""


@dataclass
class CompactionReport:
    dry_run: bool
    looked_at: list[Choice] = field(default_factory=list)
    planned: list[CompactionPlan] = field(default_factory=list)  # done, or in a preview what would be
    waiting: list[CompactionPlan] = field(default_factory=list)  # superseded files in their grace period

    @property
    def skipped(self) -> list[Choice]:
        return [c for c in self.looked_at if c.skipped]

    def render(self) -> str:
        verb = "would compact" if self.dry_run else "compacted"
        files = sum(len(p.inputs) for p in self.planned)
        lines = [f"{verb} {len(self.planned)} partitions: {files} files into "
                 f"{sum(len(p.outputs) for p in self.planned)}"]
        lines += [f"  {p.label} {p.partition}: {len(p.inputs)} files ({p.input_bytes / 1e6:.1f} MB, "
                  f"{p.rows} rows) -> {len(p.outputs)} in {p.target}" for p in self.planned]
        lines += [f"  left alone: {c.label} {c.partition} ({c.files} files): {c.skipped}" for c in self.skipped
                  if c.files > 1]
        lines += [f"  waiting: compaction {p.compaction_id} of {p.label} {p.partition}: the replaced files "
                  f"are deleted after keep_superseded_minutes from {p.switched_at}" for p in self.waiting]
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {"dry_run": self.dry_run, "compacted": [p.to_json() | {"rows": p.rows, "input_bytes": p.input_bytes}
                                                       for p in self.planned],
                "looked_at": [c.to_json() for c in self.looked_at],
                "waiting": [{"id": p.compaction_id, "table": p.table.value, "partition": p.partition,
                             "switched_at": p.switched_at, **({"table_name": p.table_name} if p.table_name else {})}
                            for p in self.waiting]}


def compactor_of(host: CompactionHost) -> Compactor:
    views = TableViews(host.warehouse, host.registrar, host.existing_table)
    return Compactor(host.config, host.store, host.fs, views, host.clock)


def compact(host: CompactionHost, only: list[str] | None = None, dry_run: bool = False, *,
            tables: tuple[CompactedTable, ...] = ONE_TABLE) -> CompactionReport:
    """`tables`: those looked at for new compactions (etl.ops.compact chooses them); the ones under
    way are carried on first whatever their table."""
    store = host.store
    store.session.assert_lock_held()
    opened = store.batches.open_batch()
    if opened:
        batch = opened[0]
        raise StateConflict(f"batch {batch.batch_id} is open in state {batch.state.value}: nothing is compacted "
                            f"while a batch may still write. `etl run` (or `etl recover`) completes it; then "
                            f"compact again")
    report = CompactionReport(dry_run)
    compactor = compactor_of(host)
    if not dry_run:
        report.waiting = compactor.finish_pending()
    busy = {(p.table, p.table_name, p.partition) for p in report.waiting}
    chooser = CompactionChooser(host.config, host.fs, compactor.views, host.partitioner, host.clock)
    committed = store.offsets.committed_offsets()
    for choice in chooser.look(tables, only):
        if not choice.skipped and (choice.table, choice.table_name, choice.partition) in busy:
            choice = replace(choice, skipped="its last compaction's replaced files are still in their grace period")
        if choice.skipped:
            report.looked_at.append(choice)
            continue
        next_id = store.compactions.next_compaction_id() + (len(report.planned) if dry_run else 0)
        found = chooser.plan(choice, next_id, committed, store.session.me.describe())
        if isinstance(found, Choice):
            report.looked_at.append(found)
            continue
        report.looked_at.append(choice)
        report.planned.append(found)
        if not dry_run:
            _carry_out(store, compactor, found, report)
    seen = {c.partition for c in report.looked_at}
    unknown = "not a partition of the table" if tables == ONE_TABLE else "not a partition of the tables looked at"
    report.looked_at += [Choice(TableKind.MAIN, name, 0, 0, unknown) for name in only or () if name not in seen]
    return report


def _carry_out(store: CompactionStore, compactor: Compactor, plan: CompactionPlan,
               report: CompactionReport) -> None:
    store.compactions.write_compaction(plan)
    log.info("compaction %d PLANNED: %s", plan.compaction_id, plan.describe())
    faults.checkpoint("compact:PLANNED")
    left = compactor.carry_on(plan, 0)
    if left is not None:
        report.waiting.append(left)
