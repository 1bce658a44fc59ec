"""A rollup's partials against the files of its table, for `etl rollup rebuild` (which writes them),
`etl verify` (which finds each in place; with --deep recomputes and compares them), and the
commands that move data files out of a table (which move their partials with them).

Each committed range's rows are read from its data file: the file's own, or, from a merged file
(etl compact), the rows of that range, told apart by their kafka_topic, kafka_partition and
kafka_offset. Each file is read once, for the columns the rollup names.
"""
from __future__ import annotations

import posixpath
from collections import defaultdict
from typing import Collection, Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from etl.config.rollups import RollupConfig
from etl.job.rollup_task import partial_rows
from etl.model.naming import FileRange
from etl.model.rollup_table import PARTIALS_FORMAT, RollupSpec, partial_name
from etl.model.schema import arrow_type
from etl.ops.coverage import Problem
from etl.ops.inventory import WarehouseFile
from etl.sink.file_format import read_columns
from etl.sink.fs import WarehouseFileSystem
from etl.sink.warehouse import Warehouse

LINEAGE = ["kafka_topic", "kafka_partition", "kafka_offset"]
REBUILD_ACTION = ("run `etl rollup rebuild --rollup {name} --execute`, which computes every partial anew from the "
                  "table's files")


def range_rows(fs: WarehouseFileSystem, spec: RollupSpec, files: Iterable[WarehouseFile],
               ) -> Iterator[tuple[WarehouseFile, pa.Table]]:
    """Each committed range (`files`: a table's inventory, a merged file once per range it holds)
    with its rows, in the columns the rollup names."""
    by_path: dict[str, list[WarehouseFile]] = defaultdict(list)
    for file in files:
        by_path[file.path].append(file)
    for path, held in sorted(by_path.items()):
        merged = len(held) > 1
        columns = sorted(set(spec.source_columns) | (set(LINEAGE) if merged else set()))
        rows = read_columns(fs, path, held[0].file_format, columns)
        for file in held:
            yield file, (_of_range(rows, file) if merged else rows)


def partial_path(warehouse: Warehouse, partials_table: str, file: WarehouseFile) -> str:
    return posixpath.join(warehouse.partials_dir(partials_table, file.partition_path), partial_name(file.range.stem))


def partials_of(fs: WarehouseFileSystem, warehouse: Warehouse, rollups: tuple[RollupConfig, ...],
                files: Iterable[WarehouseFile]) -> list[str]:
    """The partials in place of the ranges of `files` (a merged file's every range), each once:
    what `etl reset-offsets --move-aside` and `etl recover` move out with the data files they move,
    so that the view never counts rows the table no longer holds, and the reload writes them anew."""
    found = {partial_path(warehouse, rollup.partials_table, file) for file in files for rollup in rollups}
    return sorted(path for path in found if fs.exists(path))


def check_partials(fs: WarehouseFileSystem, warehouse: Warehouse, spec: RollupSpec, files: list[WarehouseFile],
                   unfinished: Collection[FileRange] = (), deep: bool = True) -> list[Problem]:
    """Every range's partial is in place, and (`deep`) says what its rows say; no partial is of a
    range the table does not hold. `unfinished`: an open batch's ranges, whose partials its run
    writes."""
    expected = {partial_path(warehouse, spec.partials_table, file) for file in files}
    action = REBUILD_ACTION.format(name=spec.rollup.name)
    finished = [f for f in files if f.range not in unfinished]
    problems = [Problem("rollup_partial_missing", path, f"{spec.rollup.describe()}: the partial of {file.range.stem} "
                        f"is missing: the view leaves its rows out", action)
                for file in finished for path in [partial_path(warehouse, spec.partials_table, file)]
                if not fs.exists(path)]
    missing = {problem.where for problem in problems}
    for file, rows in range_rows(fs, spec, finished) if deep else ():
        path = partial_path(warehouse, spec.partials_table, file)
        if path not in missing and not _same(_in_place(fs, spec, path), partial_rows(spec, rows), spec):
            problems.append(Problem("rollup_partial_differs", path, f"{spec.rollup.describe()}: the partial of "
                                    f"{file.range.stem} differs from one computed from its data file {file.path}",
                                    action))
    root = posixpath.join(warehouse.database_root, spec.partials_table)
    for path in sorted(set(fs.walk_files(root)) - expected):
        if not posixpath.basename(path).startswith(("_", ".")):
            problems.append(Problem("rollup_partial_stray", path, f"{spec.rollup.describe()}: a partial of no range "
                                    f"the table holds: the view counts rows the table does not", action))
    return problems


def _of_range(rows: pa.Table, file: WarehouseFile) -> pa.Table:
    r = file.range
    mine = pc.and_(pc.and_(pc.equal(rows["kafka_topic"], r.topic),
                           pc.equal(rows["kafka_partition"], pa.scalar(r.partition, pa.int32()))),
                   pc.and_(pc.greater_equal(rows["kafka_offset"], r.start), pc.less(rows["kafka_offset"], r.end)))
    return rows.filter(mine)


def _in_place(fs: WarehouseFileSystem, spec: RollupSpec, path: str) -> pa.Table:
    return read_columns(fs, path, PARTIALS_FORMAT, [column.name for column in spec.columns])


def _same(found: pa.Table, computed: pa.Table, spec: RollupSpec) -> bool:
    """Equal as sets of rows, each column in the partials table's type (a file's timestamps come
    back in the unit and zone its writer chose)."""
    schema = pa.schema([pa.field(c.name, arrow_type(c.hive_type)) for c in spec.columns])
    keys = [(key.name, "ascending") for key in spec.rollup.group_by]
    try:
        found = found.cast(schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError):
        return False
    return found.sort_by(keys).to_pylist() == computed.cast(schema).sort_by(keys).to_pylist()
