"""A rollup's partials against the files of its table, for `etl rollup rebuild` (which writes them),
`etl verify` (which finds each in place; with --deep recomputes and compares them), and the
commands that move data files out of a table (which move their partials with them).

A committed file's partial is named by the file (etl.model.compaction.partial_of): a batch's
file's is its range's, a merged file's (etl compact) is its ranges' partials folded. Each file is
read once, for the columns the rollup names.
"""
from __future__ import annotations

import posixpath
from typing import Collection, Iterable, Iterator

import pyarrow as pa

from etl.config.rollups import RollupConfig
from etl.job.rollup_task import live_partials, partial_rows
from etl.model.compaction import partial_of
from etl.model.naming import FileRange, named_range
from etl.model.rollup_table import PARTIALS_FORMAT, RollupSpec
from etl.model.schema import arrow_type
from etl.ops.coverage import Problem
from etl.ops.inventory import WarehouseFile
from etl.sink.file_format import read_columns
from etl.sink.fs import WarehouseFileSystem
from etl.sink.warehouse import Warehouse

REBUILD_ACTION = ("run `etl rollup rebuild --rollup {name} --execute`, which computes every partial anew from the "
                  "table's files")


def file_rows(fs: WarehouseFileSystem, spec: RollupSpec, files: Iterable[WarehouseFile],
              ) -> Iterator[tuple[WarehouseFile, pa.Table]]:
    """Each committed file of `files` (a table's inventory: a merged file is listed once per range
    it holds, and read once) with its rows, in the columns the rollup names."""
    by_path = {file.path: file for file in sorted(files, key=lambda f: f.path)}
    for path, file in by_path.items():
        yield file, read_columns(fs, path, file.file_format, spec.source_columns)


def partial_path(warehouse: Warehouse, partials_table: str, file: WarehouseFile) -> str:
    return posixpath.join(warehouse.partials_dir(partials_table, file.partition_path),
                          partial_of(posixpath.basename(file.path)))


def partials_of(fs: WarehouseFileSystem, warehouse: Warehouse, rollups: tuple[RollupConfig, ...],
                files: Iterable[WarehouseFile]) -> list[str]:
    """The partials in place of `files`, each once: what `etl reset-offsets --move-aside` and `etl
    recover` move out with the data files they move, so that the view never counts rows the table
    no longer holds, and the reload writes them anew."""
    found = {partial_path(warehouse, rollup.partials_table, file) for file in files for rollup in rollups}
    return sorted(path for path in found if fs.exists(path))


def orphan_partials(fs: WarehouseFileSystem, warehouse: Warehouse, rollups: tuple[RollupConfig, ...],
                    files: Iterable[WarehouseFile], unfinished: Collection[FileRange] = ()) -> list[str]:
    """The partials the views read of no file the tables hold (`files`: their inventory), but an
    open batch's (`unfinished`): a merged file deleted by hand leaves its folded partial, which
    `etl recover` moves out before it writes the file's ranges, and their partials, anew."""
    files = list(files)
    expected = {partial_path(warehouse, rollup.partials_table, file) for file in files for rollup in rollups}
    return [path for rollup in rollups for path in live_partials(fs, warehouse, rollup.partials_table)
            if path not in expected and named_range(posixpath.basename(path)) not in unfinished]


def check_partials(fs: WarehouseFileSystem, warehouse: Warehouse, spec: RollupSpec, files: list[WarehouseFile],
                   unfinished: Collection[FileRange] = (), deep: bool = True) -> list[Problem]:
    """Every committed file's partial is in place, and (`deep`) says what its rows say; the view
    reads no partial of a file the table does not hold. `unfinished`: an open batch's ranges,
    whose partials its run writes."""
    action = REBUILD_ACTION.format(name=spec.rollup.name)
    finished = [f for f in files if f.range not in unfinished]
    problems = [Problem("rollup_partial_missing", path, f"{spec.rollup.describe()}: the partial of "
                        f"{posixpath.basename(file.path)} is missing: the view leaves its rows out", action)
                for file in {f.path: f for f in finished}.values()
                for path in [partial_path(warehouse, spec.partials_table, file)] if not fs.exists(path)]
    missing = {problem.where for problem in problems}
    for file, rows in file_rows(fs, spec, finished) if deep else ():
        path = partial_path(warehouse, spec.partials_table, file)
        if path not in missing and not _same(_in_place(fs, spec, path), partial_rows(spec, rows), spec):
            problems.append(Problem("rollup_partial_differs", path, f"{spec.rollup.describe()}: the partial of "
                                    f"{posixpath.basename(file.path)} differs from one computed from its data file "
                                    f"{file.path}", action))
    expected = {partial_path(warehouse, spec.partials_table, file) for file in files}
    for path in live_partials(fs, warehouse, spec.partials_table):
        if path not in expected and named_range(posixpath.basename(path)) not in unfinished:
            problems.append(Problem("rollup_partial_stray", path, f"{spec.rollup.describe()}: a partial of no file "
                                    f"the table holds: the view counts rows the table does not",
                                    "run `etl recover --execute`, which moves it out and writes anew the ranges "
                                    "the table lacks, or " + action))
    return problems


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
