"""A range's rollup partials, written by its task once its data file is published, and before the
driver records the batch WRITTEN: one file per rollup, under the range's own name in the
partials table's partition folder (etl.model.rollup_table).

A partial is computed from the published data file, read back for the columns the rollup names,
not from the rows as they streamed by: the file is what the table holds, so the partial says what
a recount of the table says, and a replay that finds the data file in place (its rows no longer
read from Kafka) computes the same partial from it. A partial already in place is kept, as a
data file is (etl.sink.commit): a replay writes nothing twice.
"""
from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING

import pyarrow as pa

from etl import faults
from etl.config.rollup_terms import Function
from etl.model.compaction import partition_of_folder
from etl.model.naming import is_temp_name, temp_name
from etl.model.rollup_table import RollupSpec, partial_name
from etl.model.schema import arrow_type
from etl.rows.rollup_filter_eval import rows_kept
from etl.rows.rollup_partials import partials
from etl.sink.commit import publish
from etl.sink.file_format import open_sink, read_columns
from etl.sink.fs import WarehouseFileSystem
from etl.sink.layout import FileLayout
from etl.sink.warehouse import Warehouse

if TYPE_CHECKING:  # the driver's side; a task does not import it
    from etl.job.batch_tables import BatchTables
    from etl.model.batch import Batch


def publish_partials(fs: WarehouseFileSystem, rollups: tuple[RollupSpec, ...], folders: tuple[str, ...],
                     data_file: str, layout: FileLayout, stem: str, partition: int,
                     rows: pa.Table | None = None) -> int:
    """Each rollup's partial of the published `data_file` (stored as `layout` says) into its folder
    (`folders`, aligned with `rollups`); how many this call published. `rows`: the range's rows,
    already read (a merged file's share: etl.ops.rollup_rebuild)."""
    missing = [(spec, posixpath.join(folder, partial_name(stem))) for spec, folder in zip(rollups, folders)]
    missing = [(spec, path) for spec, path in missing if not fs.exists(path)]
    if not missing:
        return 0
    if rows is None:
        columns = sorted({column for spec, _ in missing for column in spec.source_columns})
        rows = read_columns(fs, data_file, layout.file_format, columns)
    published = 0
    for spec, path in missing:
        published += _publish(fs, path, partial_rows(spec, rows), layout)
        faults.checkpoint(f"rollup:{partition}")
    return published


def missing_partials(fs: WarehouseFileSystem, tables: "BatchTables", batch: "Batch") -> list[str]:
    """The partials a batch's ranges should have and do not (the driver's check before WRITTEN)."""
    missing = []
    for r in batch.file_ranges:
        for folder in tables.of(r).rollup_dirs(batch.partition_values):
            path = posixpath.join(folder, partial_name(r.file_range.stem))
            if not fs.exists(path):
                missing.append(path)
    return missing


def live_partials(fs: WarehouseFileSystem, warehouse: Warehouse, partials_table: str) -> list[str]:
    """The partials the view reads: those in each partition's current folder (the default one, or
    the one a compaction folded them into: `warehouse`'s relocations), not a folder a compaction
    replaced and has yet to empty, nor a temp file."""
    root = warehouse.partials_root(partials_table)
    live = []
    for path in fs.walk_files(root):
        folder, name = posixpath.split(path)
        relative = posixpath.relpath(folder, root)
        partition = partition_of_folder(relative) or relative
        if not (is_temp_name(name) or name.startswith(("_", "."))) \
                and folder == warehouse.partials_dir(partials_table, partition):
            live.append(path)
    return sorted(live)


def partial_rows(spec: RollupSpec, rows: pa.Table) -> pa.Table:
    """The partial of `rows` (a data file's columns), typed as the partials table's columns."""
    rollup = spec.rollup
    if rollup.where is not None:
        rows = rows.filter(rows_kept(rows, rollup.where))
    types = {column.name: arrow_type(column.hive_type) for column in spec.columns}
    for aggregate in rollup.aggregates:  # summed in the partial's type: a sum of int32s may pass 2**31
        if aggregate.function is Function.SUM and aggregate.column is not None:
            index = rows.schema.get_field_index(aggregate.column)
            rows = rows.set_column(index, aggregate.column, rows.column(index).cast(types[aggregate.name]))
    found = partials(rows, rollup.group_by, rollup.aggregates)
    return found.cast(pa.schema([pa.field(name, types[name]) for name in found.column_names]))


def _publish(fs: WarehouseFileSystem, path: str, rows: pa.Table, layout: FileLayout) -> int:
    temp = posixpath.join(posixpath.dirname(path), temp_name(posixpath.basename(path)))
    sink = open_sink(fs, temp, rows.schema, max(rows.num_rows, 1), layout.without_columns())
    try:
        sink.open()
        sink.append(rows)
        sink.close()
    except BaseException:
        sink.abort()
        raise
    return int(publish(fs, temp, path))
