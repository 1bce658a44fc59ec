"""What `etl run` says of each batch it committed: one line, from the batch's record in ZooKeeper
(so that a resumed batch is described as fully as one run start to end)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

from etl.model.batch import Batch


@dataclass(frozen=True)
class BatchSummary:
    batch_id: int
    resumed: bool
    files: int
    records: int
    rows: int
    rejected: int
    seconds: float
    reached_cap: bool  # some partition had more data than max_records_per_partition
    unmatched: dict = field(default_factory=dict)  # joined dimension -> rows whose key found no match
    dimension_changes: int = 0  # pins replaced under on_dimension_change = use_current
    ignored_fields: dict = field(default_factory=dict)  # writer-schema field the table lacks -> records
    late_rows: int = 0  # by event time: rows written into partitions already due their _SUCCESS

    @classmethod
    def of(cls, batch: Batch, resumed: bool, seconds: float, cap: int) -> "BatchSummary":
        """`cap`: [job] max_records_per_partition."""
        return cls(batch.batch_id, resumed, written_files(batch), batch.record_count, batch.rows or 0,
                   batch.rejected or 0, seconds, reached_cap=any(r.size >= cap for r in batch.ranges),
                   unmatched=dict(batch.unmatched or {}), dimension_changes=len(batch.dimension_changes),
                   ignored_fields=dict(batch.ignored_fields),
                   late_rows=batch.event_time.late_rows)

    def describe(self) -> str:
        kind = "resumed" if self.resumed else "new"
        unmatched = "".join(f", unmatched in {name}: {count}" for name, count in sorted(self.unmatched.items()))
        changed = f", {self.dimension_changes} dimension(s) changed on resume (use_current)" \
            if self.dimension_changes else ""
        ignored = (", fields not in the table, ignored: " + ", ".join(
            f"{name} ({count} records)" for name, count in sorted(self.ignored_fields.items()))
            if self.ignored_fields else "")
        return (f"batch {self.batch_id} ({kind}) COMMITTED: {self.files} files, {self.rows} rows, "
                f"{self.rejected} rejected{unmatched}{changed}{ignored}, offsets covered {self.records}, "
                f"{self.seconds:.1f}s")


def written_files(batch: Batch) -> int:
    """The Parquet files the batch wrote into its tables: one per range in each table its topic
    is routed to (a split range writes a file into each table of its split, empty or not), or
    by event time one per range in each Hive partition of each table it placed rows in (a record
    from before they were counted: at least one per partition). Not counted: the rejected
    table's files (the line says how many records were rejected) and split ranges' manifests."""
    counted = batch.event_time.files_written
    if counted is None:
        return sum(len(batch.tables.get(r.topic) or (None,)) for r in batch.file_ranges)
    return counted


def summed(counts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """The counts of every task added up, name by name."""
    total: dict[str, int] = {}
    for each in counts:
        for name, count in each.items():
            total[name] = total.get(name, 0) + count
    return total
