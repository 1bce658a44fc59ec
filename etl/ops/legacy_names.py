"""Partitions named before dt was zero-padded (`dt=1-01-02/hour=05`), moved to their padded name
(`dt=0001-01-02/hour=05`) by `etl recover`, exactly once.

Releases before the padding named the partitions of years 1-999 with strftime's %Y, which glibc
does not pad. Such names sort wrongly, so a range query on dt misses their rows. The job still
reads them (etl.model.partitioning maps a name to its padded form), and new rows of those
hours go to the padded partition; this module moves what the old names hold:
  1. the padded partition is registered (ADD IF NOT EXISTS) at the folder the job writes it to;
  2. each data file of the old folder moves there under its own name. A query through the
     metastore reads both partitions, and each file is in one of them: every row is seen once.
     The `_SUCCESS` marker follows; temp files of dead attempts are deleted;
  3. the old partition is dropped (the tables are EXTERNAL: no file is deleted). Its folder
     stays, empty: the job never deletes folders.
Every step is idempotent, so a crash anywhere is carried on by the next `etl recover`. Each
file's move is one atomic rename (WebHDFS RENAME; renameat2 RENAME_NOREPLACE on a local
filesystem), so a crash never leaves a file in both folders, which a query would read twice.
Only a local filesystem without RENAME_NOREPLACE moves in two steps (link, then unlink): a file
a crash left in both folders is dropped from the old one when both copies are the same size;
otherwise the move stops, naming both.

Only the main table: rejected rows go to the batch's planning-time partition, never a year
before 1000. A legacy partition that was compacted is refused: its files live in the compacted
folder, which the metastore holds; move them by hand as the message says.
"""
from __future__ import annotations

import logging
import posixpath

from etl import faults
from etl.errors import StateConflict
from etl.model.compaction import TableKind
from etl.model.naming import is_temp_name, parse_final_name, partition_values
from etl.model.partitioning import is_legacy_path, padded_path
from etl.ops.coverage import Problem
from etl.sink.fs import WarehouseFileSystem
from etl.sink.markers import MARKER_NAME
from etl.sink.warehouse import Warehouse

log = logging.getLogger(__name__)


def legacy_partitions(fs: WarehouseFileSystem, warehouse: Warehouse) -> list[str]:
    """The main table's partition folders with an unpadded year that still hold anything."""
    root, found = warehouse.table_root, []
    for day in fs.list_dir(root):
        if not (day.startswith("dt=") and is_legacy_path(day)):
            continue
        names = fs.list_dir(posixpath.join(root, day))
        hours = [name for name in names if name.startswith("hour=")]
        found += [f"{day}/{hour}" for hour in hours if fs.list_dir(posixpath.join(root, day, hour))]
        if names and not hours:
            found.append(day)
    return found


def check_legacy_names(fs: WarehouseFileSystem, warehouse: Warehouse) -> list[Problem]:
    """`etl verify`: each legacy partition, with the way out."""
    return [Problem("legacy_partition_name", old, f"named before dt was zero-padded: its rows sort outside their "
                    f"dates, so range queries on dt miss them, and new rows of those hours go to {padded_path(old)}",
                    f"run `etl recover`: it moves the partition's files to {padded_path(old)}, each exactly once, "
                    f"and drops the old partition from the metastore")
            for old in legacy_partitions(fs, warehouse)]


def move_legacy_partitions(fs: WarehouseFileSystem, warehouse: Warehouse, registrar, out) -> int:
    """Move every legacy partition of the main table to its padded name; how many moved.
    `registrar`: an etl.hive.registrar.HiveRegistrar. The caller holds the job lock."""
    legacy = sorted(set(legacy_partitions(fs, warehouse)) |
                    {path for path in registrar.partitions(TableKind.MAIN) if is_legacy_path(path)})
    for old in legacy:
        moved = _move(fs, warehouse, registrar, old)
        out(f"done: partition {old} (named before dt was zero-padded) moved to {padded_path(old)}: {moved} files")
    return len(legacy)


def _move(fs: WarehouseFileSystem, warehouse: Warehouse, registrar, old: str) -> int:
    new = padded_path(old)
    if old in warehouse.relocations.main:
        raise StateConflict(f"partition {old} (named before dt was zero-padded) was compacted: its files are in "
                            f"{warehouse.main_dir(old)}. Move them into {warehouse.main_dir(new)} by hand, then "
                            f"ALTER TABLE ... DROP PARTITION for {old}, and run `etl recover` again")
    source, target = posixpath.join(warehouse.table_root, old), warehouse.main_dir(new)
    names = fs.list_dir(source)
    foreign = [n for n in names
               if not (parse_final_name(n, warehouse.main_format) or is_temp_name(n) or n == MARKER_NAME)]
    if foreign:
        raise StateConflict(f"{source} holds {', '.join(foreign[:3])}, which this job did not write: move them out "
                            f"of the warehouse after checking where they came from, then run `etl recover` again")
    fs.makedirs(target)
    registrar.add_partitions([partition_values(new)], [])
    moved = 0
    for name in names:
        here, there = posixpath.join(source, name), posixpath.join(target, name)
        if is_temp_name(name):
            fs.delete(here)
        elif name == MARKER_NAME and fs.exists(there):
            fs.delete(here)
        elif not fs.rename_no_replace(here, there):
            _drop_copy(fs, here, there)
        else:
            moved += 1
        faults.checkpoint("legacy:file-moved")
    registrar.drop_partition(TableKind.MAIN, old)
    log.info("partition %s moved to %s: %d files", old, new, moved)
    return moved


def _drop_copy(fs: WarehouseFileSystem, here: str, there: str) -> None:
    """`here` is already at `there` as well: the same file when both have its size."""
    mine, theirs = fs.info(here), fs.info(there)
    if mine is None or theirs is None or mine.size != theirs.size:
        raise StateConflict(f"{here} cannot move to {there}: a different file is there already. Check which one "
                            f"holds the range's rows, move the other out of the warehouse, then run `etl recover` "
                            f"again")
    fs.delete(here)
