"""The `table` label of a run's batch metrics (etl.ops.metrics): which table each count is of.

A one-table job labels them all with its table, `<database>.<table>`, as it always has: rows,
rejected and late rows, offsets, and the files and bytes of its main and rejected tables, one
series each, also when the run wrote nothing (0). A routed job's batch writes several tables at
once (and commits once), so:
  - rows, files and bytes: one series per table the run's batches wrote, its rows from each
    batch's per-table counts (Batch.extra["table_rows"], etl.job.batch_tables), its files
    listed in its own partition folder; a run that wrote no batch has none;
  - rejected rows, and the rejected table's files and bytes: one series labelled with the job's
    rejected table, which every route shares (a record that cannot be decoded has no route: a
    split topic's field is read by decoding it);
  - offsets and late rows: the job's, labelled table="" (which Prometheus stores as no label): a
    split topic's offsets feed several tables, and late rows come by event time, which routes
    do not take.
So `sum by (etl_job)` of any of them is the job's, with or without routes, and the series of a
one-table job are as they were. Lag, offsets committed and the run's times are the job's in both.
"""
from __future__ import annotations

from typing import Iterable

from etl.config import Config
from etl.model.shape import JOB_WIDE, shape_of
from etl.job.summary import BatchSummary
from etl.job.write_mode import mode_of
from etl.model.batch import Batch
from etl.model.naming import REJECTED_FORMAT
from etl.sink.fs import WarehouseFileSystem
from etl.sink.warehouse import Warehouse

FileCounts = dict[str, tuple[int, int]]  # table label -> (files, bytes)


def qualified(config: Config, table: str) -> str:
    return f"{config.hive.database}.{table}"


def counted(config: Config, field: str, summaries: Iterable[BatchSummary], batches: Iterable[Batch]) -> dict[str, int]:
    """The run's `field` of BatchSummary (rows, rejected, late_rows, records) by table label."""
    total = sum(getattr(summary, field) for summary in summaries)
    by_table = shape_of(config).counts_by_table(field, total, batches)
    return {_label(config, table): count for table, count in by_table.items()}


def _label(config: Config, table: str) -> str:
    return JOB_WIDE if table == JOB_WIDE else qualified(config, table)


def written_files(fs: WarehouseFileSystem, config: Config, warehouse: Warehouse, batches: list[Batch]) -> FileCounts:
    """(count, bytes) of the batches' data files by table label. Batches record file names,
    not sizes: each folder a batch wrote to is listed once, with sizes (one WebHDFS request per
    folder), and a file found nowhere (moved since) is not counted. By event time a range has a
    file in each partition it touched, under the range's name; a range of a split topic has one
    in each of its tables, under the range's name too."""
    shape = shape_of(config)
    counts: FileCounts = {qualified(config, table): (0, 0) for table in shape.always_counted()}
    for batch in batches:
        # The tables' files in their format, the rejected table's as Parquet: each folder holds one table's.
        names = {r.name_as(f) for r in batch.file_ranges for f in {config.hive.format, REJECTED_FORMAT}}
        for table, folders in shape.folders_by_table(mode_of(batch), warehouse, batch).items():
            label = qualified(config, table)
            count, size = counts.get(label, (0, 0))
            for folder in folders:
                for info in fs.list_files(folder):
                    if info.path.rsplit("/", 1)[-1] in names:
                        count, size = count + 1, size + info.size
            counts[label] = (count, size)
    return counts


def merged(*counts: FileCounts) -> FileCounts:
    """File counts added up by table label."""
    total: FileCounts = {}
    for each in counts:
        for label, (files, size) in each.items():
            have = total.get(label, (0, 0))
            total[label] = (have[0] + files, have[1] + size)
    return total
