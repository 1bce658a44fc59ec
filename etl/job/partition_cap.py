"""[hive] max_partitions_per_batch: a batch by event time that would touch more Hive partitions
than the cap is refused before any file is written, or (on_too_many_partitions = reject) keeps
the earliest `cap` partitions and sends the rows of the later ones to the rejected table (issue 26).

Which partitions a batch touches is known only from its rows, so with a cap set the batch's ranges
are read and placed once first (the Spark tasks below: read, decode, place, count; nothing is
written), and the plan is stored only then: refused, or with the last partition it keeps pinned
in its Placement (etl.rows.placement rejects the rest, the same way at every attempt). It costs a second read
of the batch, and only with the key set. A backfill spread over years otherwise writes thousands
of small files and registers thousands of partitions in one batch (docs/event-time.md).

A routed batch counts time partitions, not (table, partition) pairs: the pinned last key is one
for all its tables, so each table may get up to the cap.
"""
from __future__ import annotations

import logging
from dataclasses import replace
from typing import Callable, Iterable, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from etl.config.model import PartitionCapAction
from etl.errors import EtlError
from etl.job.range_shares import RangeShares
from etl.job.range_task import RangeTask, opened_tables, range_chunks
from etl.model.batch import Batch
from etl.rows.placement import planned_key
from etl.source.chunk import RawChunk

log = logging.getLogger(__name__)


class TooManyPartitions(EtlError):
    """A batch would open more Hive partitions than [hive] max_partitions_per_batch (exit 1)."""


def partition_keys(task: RangeTask, lookups: Mapping[str, object] | None = None) -> list[int]:
    """The partition keys (window starts) the rows of one range go to, as the write would place
    them: a table of the range with no kept row writes its empty file into the planning-time partition."""
    return range_keys(task, lambda: range_chunks(task), opened_tables(lookups))


def range_keys(task: RangeTask, chunks: Callable[[], Iterable[RawChunk]], tables: Mapping[str, pa.Table]) -> list[int]:
    """partition_keys over `chunks`, the range's (handed in by the unit tests)."""
    placement = task.placing.placement  # the partition cap counts a batch planned by event time
    shares = RangeShares(task, tables, placement)
    keys: dict[str, set[int]] = {target.table: set() for target in shares.targets}
    for chunk in chunks():
        for target, rows in shares.process(chunk)[0]:
            if rows.placed is not None and len(rows.placed.keys):
                keys[target.table].update(k for k in pc.unique(rows.placed.keys).to_pylist() if k is not None)
    return sorted(set().union(*(found or {planned_key(placement)} for found in keys.values())))


def apply_partition_cap(batch: Batch, counted: list[list[int]], cap: int, action: PartitionCapAction) -> Batch:
    """The batch as it may be planned when its ranges' rows fall in more than `cap` partitions:
    refused (fail), or with the key of the last partition it keeps pinned in its Placement, so
    that every attempt rejects the rows of the later ones (reject)."""
    touched = sorted(set().union(*counted)) if counted else []
    if len(touched) <= cap:
        return batch
    if action is PartitionCapAction.REJECT:
        log.warning("batch %d touches %d Hive partitions, more than [hive] max_partitions_per_batch = %d: the rows "
                    "of the %d latest go to the rejected table (on_too_many_partitions = reject)", batch.batch_id,
                    len(touched), cap, len(touched) - cap)
        pinned = {**batch.event_time.placement, "last_key": touched[cap - 1]}
        return replace(batch, event_time=replace(batch.event_time, placement=pinned))
    raise TooManyPartitions(
        f"batch {batch.batch_id} would touch {len(touched)} Hive partitions, more than [hive] "
        f"max_partitions_per_batch = {cap} (on_too_many_partitions = fail): its records' event times are spread "
        f"that widely (a backfill?). Nothing was written or committed. Raise max_partitions_per_batch if so many "
        f"partitions are meant (each is a file and a metastore entry: docs/event-time.md), lower [job] "
        f"max_records_per_partition so that a batch spans fewer of them, or set on_too_many_partitions = reject, "
        f"then run again")
