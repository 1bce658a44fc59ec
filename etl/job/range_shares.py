"""A range's chunk as each table's rows: the event-time task (etl.job.event_task) and the
partition cap (etl.job.partition_cap) read a range the same way whether its records go to one
table or, split by a field (etl.model.routes.TopicSplit), to several.

One target (a one-table job's range, or a topic one route takes whole) gets every chunk whole.
A split gives each table its share of a chunk (etl.rows.routing), in offset order, through that
route's own row pipeline, whose rejects name the route; the records no table takes come back as
rejected rows of the first table's pipeline, their reasons naming no route.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import pyarrow as pa

from etl.job.partition_writer import WriterSpec
from etl.job.range_task import RangeTask
from etl.job.summary import summed
from etl.model.partitioning import Placement
from etl.rows.pipeline import ChunkRows, RowPipeline
from etl.rows.routing import FieldRouter
from etl.source.chunk import RawChunk


@dataclass(frozen=True)
class ShareTarget:
    """One table a range's rows go to."""

    table: str  # "": the range's own table (a one-table job's, or a topic one route takes whole)
    table_root: str
    relocated: Mapping[str, str]  # that table's compacted partitions: path -> folder under table_root
    writer: WriterSpec


def share_targets(task: RangeTask) -> tuple[ShareTarget, ...]:
    if task.split is None:
        return (ShareTarget("", task.placing.table_root, task.placing.relocated, task.writer),)
    return tuple(ShareTarget(t.name, t.table_root, t.relocated, t.writer) for t in task.split.tables)


class RangeShares:
    """Each target's RowPipeline over one pass of a range; `placement`: the batch's (by event
    time), or None."""

    def __init__(self, task: RangeTask, lookups: Mapping[str, pa.Table], placement: Placement | None):
        r = task.range
        self.targets = share_targets(task)
        self.pipelines = {t.table: RowPipeline(t.writer.rows, r.topic, r.partition, lookups, placement)
                          for t in self.targets}
        self._router = None if task.split is None else FieldRouter(task.split.split, task.split.probe)
        self.rejected_schema = self.pipelines[self.targets[0].table].rejected_schema

    def schema(self, table: str) -> pa.Schema:
        return self.pipelines[table].schema

    def process(self, chunk: RawChunk) -> tuple[list[tuple[ShareTarget, ChunkRows]], pa.Table | None]:
        """Each target's rows of the chunk, and the rejected rows of the records no table takes."""
        if self._router is None:
            only = self.targets[0]
            return [(only, self.pipelines[only.table].process(chunk))], None
        if not len(chunk):
            return [], None
        routed = self._router.route(chunk.values)
        shared = [(t, self.pipelines[t.table].process(chunk.take(routed.by_table[t.table].to_pylist())))
                  for t in self.targets if t.table in routed.by_table]
        refused = self.pipelines[self.targets[0].table].rejected(chunk, routed.rejected) if routed.rejected else None
        return shared, refused

    def unmatched(self) -> dict[str, int]:
        return summed(p.unmatched for p in self.pipelines.values())

    def ignored_fields(self) -> dict[str, int]:
        return summed(p.ignored_fields for p in self.pipelines.values())
