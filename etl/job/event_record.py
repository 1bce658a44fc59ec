"""What a batch by event time records when it reaches WRITTEN.

The partitions it touched (so that registration, a resume, `etl verify` and the markers never
list the warehouse to find them), each Kafka partition's latest event time (what the watermark
is computed from, committed with the offsets), and the markers' ledger with the touched
partitions. Late rows are logged here, once per partition, as LATE DATA.

A routed batch's partitions are per table: each entry names its table (a split range's part
names it; a range of a topic one route takes whole is in the table its plan recorded). A one-table
batch's entries name none, as before.
"""
from __future__ import annotations

import logging
from typing import Mapping

from etl.config import HiveConfig
from etl.job.range_task import RangeResult
from etl.model.batch import Batch, TouchedPartition
from etl.sink.markers import SuccessMarkers

log = logging.getLogger(__name__)


def touched_partitions(results: list[RangeResult],
                       tables: Mapping[str, list[str]] | None = None) -> list[TouchedPartition]:
    """Every Hive partition the ranges wrote into, with its table in a routed batch (`tables`:
    Batch.tables), sorted; `files`: one per range that placed rows there."""
    touched: dict[tuple[str, str], list[int]] = {}
    for result in results:
        own = ((tables or {}).get(result.range.topic) or [""])[0]
        for part in result.parts:
            counts = touched.setdefault((part.partition, part.table or own), [0, 0, 0])
            counts[0], counts[1], counts[2] = counts[0] + part.rows, counts[1] + part.late, counts[2] + 1
    return [TouchedPartition(path, rows, late, files, table)
            for (path, table), (rows, late, files) in sorted(touched.items())]


def event_time_record(batch: Batch, results: list[RangeResult], markers: SuccessMarkers, hive: HiveConfig) -> dict:
    """The changes the WRITTEN header carries, given what the batch's tasks returned."""
    partitions = touched_partitions(results, batch.tables)
    for part in partitions:
        if part.late:
            log.error("LATE DATA: batch %d wrote %d rows into Hive partition %s of %s.%s, which was already due its "
                      "_SUCCESS when the batch was planned: written exactly once all the same ([hive] late_data = "
                      "write); readers that trusted the marker miss them", batch.batch_id, part.late,
                      part.partition, hive.database, part.table or hive.the_table)
    event_high = {f"{r.range.topic}:{r.range.partition}": r.max_event_ms for r in results
                  if r.max_event_ms is not None}
    return {"event_time": batch.event_time.at_written(tuple(partitions), event_high),
            "extra": markers.on_written(batch, partitions)}
