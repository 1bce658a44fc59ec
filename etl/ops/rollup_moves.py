"""The rollup partials that go with data files an operator command moves out of a table.

A partial says what its range's data file holds (etl.job.rollup_task). `etl reset-offsets
--move-aside` and `etl recover` move data files out before their ranges are loaded again: each
range's partials go with them, into the same operation's folder, so that the view never counts
rows the table no longer holds, and the reload writes the range's partials anew.
"""
from __future__ import annotations

import posixpath
from typing import Iterable

from etl.config.rollups import RollupConfig
from etl.model.rollup_table import partial_name
from etl.ops.inventory import WarehouseFile
from etl.sink.fs import WarehouseFileSystem
from etl.sink.warehouse import Warehouse


def partials_of(fs: WarehouseFileSystem, warehouse: Warehouse, rollups: tuple[RollupConfig, ...],
                files: Iterable[WarehouseFile]) -> list[str]:
    """The partials in place of the ranges of `files` (a merged file's every range), each once."""
    found = set()
    for file in files:
        for rollup in rollups:
            path = posixpath.join(warehouse.partials_dir(rollup.partials_table, file.partition_path),
                                  partial_name(file.range.stem))
            if fs.exists(path):
                found.add(path)
    return sorted(found)
