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
from etl.job.summary import BatchSummary
from etl.job.write_mode import mode_of
from etl.model.batch import TABLE_ROWS_KEY, Batch
from etl.sink.fs import WarehouseFileSystem
from etl.sink.warehouse import Warehouse

JOB_WIDE = ""  # a routed job's count that is of no one table
FileCounts = dict[str, tuple[int, int]]  # table label -> (files, bytes)


def qualified(config: Config, table: str) -> str:
    return f"{config.hive.database}.{table}"


def counted(config: Config, field: str, summaries: Iterable[BatchSummary], batches: Iterable[Batch]) -> dict[str, int]:
    """The run's `field` of BatchSummary (rows, rejected, late_rows, records) by table label."""
    total = sum(getattr(summary, field) for summary in summaries)
    if config.routes.implicit:
        return {qualified(config, config.hive.the_table): total}
    if field == "rejected":
        return {qualified(config, config.hive.rejected_table): total}
    if field == "rows":
        return _table_rows(config, batches)
    return {JOB_WIDE: total}


def _table_rows(config: Config, batches: Iterable[Batch]) -> dict[str, int]:
    rows: dict[str, int] = {}
    for batch in batches:
        for table, count in batch.extra.get(TABLE_ROWS_KEY, {}).items():
            label = qualified(config, table)
            rows[label] = rows.get(label, 0) + count
    return rows


def written_files(fs: WarehouseFileSystem, config: Config, warehouse: Warehouse, batches: list[Batch]) -> FileCounts:
    """(count, bytes) of the batches' data files by table label. Batches record file names,
    not sizes: each folder a batch wrote to is listed once, with sizes (one WebHDFS request per
    folder), and a file found nowhere (moved since) is not counted. By event time a range has a
    file in each partition it touched, under the range's name; a range of a split topic has one
    in each of its tables, under the range's name too."""
    counts: FileCounts = {qualified(config, config.hive.the_table): (0, 0)} if config.routes.implicit else {}
    for batch in batches:
        names = {r.file_name for r in batch.file_ranges}
        for label, folders in _folders(config, warehouse, batch).items():
            count, size = counts.get(label, (0, 0))
            for folder in folders:
                for info in fs.list_files(folder):
                    if info.path.rsplit("/", 1)[-1] in names:
                        count, size = count + 1, size + info.size
            counts[label] = (count, size)
    return counts


def _folders(config: Config, warehouse: Warehouse, batch: Batch) -> dict[str, list[str]]:
    """The folders of the batch's files, by table label."""
    rejected = warehouse.rejected_dir(batch.partition_values)
    if config.routes.implicit:
        parts = mode_of(batch).main_partitions(batch)
        return {qualified(config, config.hive.the_table): [warehouse.main_dir(part) for part in parts] + [rejected]}
    tables = {qualified(config, table): [warehouse.for_table(table).main_dir(part) for part in parts]
              for table, parts in mode_of(batch).table_partitions(batch).items()}  # by event time: those it touched
    return {**tables, qualified(config, config.hive.rejected_table): [rejected]}


def merged(*counts: FileCounts) -> FileCounts:
    """File counts added up by table label."""
    total: FileCounts = {}
    for each in counts:
        for label, (files, size) in each.items():
            have = total.get(label, (0, 0))
            total[label] = (have[0] + files, have[1] + size)
    return total
