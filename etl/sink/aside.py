"""Moving committed files out of a table without deleting them.

`etl recover` moves a broken file out before it rewrites its range, and `etl reset-offsets
--move-aside` moves the files a backwards reset will load again. Both keep the files, under
`<warehouse>/_etl_moved_aside/<job>/<when>/<table>/<partition>/<name>`: outside every table's
folder, so no query sees them, and a name starting with `_`, so Hive and Spark skip it even when
they list the warehouse root. Each move is a no-replace rename on the same filesystem, and is
idempotent: a move whose source is gone and whose target is there was done by an earlier attempt.
"""
from __future__ import annotations

import posixpath

from etl.errors import WarehouseError
from etl.sink.fs import WarehouseFileSystem

ASIDE_FOLDER = "_etl_moved_aside"


def aside_root(fs_root: str, job_name: str, stamp: str) -> str:
    """The folder one operation moves its files to; `stamp` names the operation (a UTC time)."""
    return posixpath.join(fs_root, ASIDE_FOLDER, job_name, stamp.replace(":", "").replace("+0000", "Z"))


def aside_path(fs_root: str, root: str, path: str) -> str:
    """Where `path` (a file under the warehouse root) goes under the operation's folder `root`."""
    return posixpath.join(root, posixpath.relpath(path, fs_root))


def move_aside(fs: WarehouseFileSystem, moves: list[tuple[str, str]]) -> None:
    """Carry out (source, target) moves; each one already done is skipped."""
    for source, target in moves:
        if not fs.exists(source):
            if fs.exists(target):
                continue
            raise WarehouseError(f"cannot move {source} aside: it is gone, and {target} is not there either")
        fs.makedirs(posixpath.dirname(target))
        if not fs.rename_no_replace(source, target):
            raise WarehouseError(f"cannot move {source} aside to {target}: the target exists already")
