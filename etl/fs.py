"""The warehouse filesystem: the handful of operations the commit protocol needs.

`rename_no_replace` is the commit point of every file. It must be atomic and must never
overwrite: POSIX rename(2) silently replaces, so the local backend links the temp file to
its final name (link(2) fails with EEXIST) and then unlinks the temp name.
"""
from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from typing import BinaryIO, Iterator

from etl.errors import WarehouseError


@dataclass(frozen=True)
class FileInfo:
    path: str
    size: int
    modified: float


class LocalFileSystem:
    """The embedded default backend (file:///...). Safe to pickle into Spark tasks."""

    scheme = "file"

    def open_write(self, path: str) -> BinaryIO:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return open(path, "xb")

    def open_read(self, path: str) -> BinaryIO:
        return open(path, "rb")

    def rename_no_replace(self, src: str, dst: str) -> bool:
        """Publish src as dst. True if dst was created, False if dst already existed."""
        try:
            os.link(src, dst)
        except FileExistsError:
            return False
        except OSError as exc:
            raise WarehouseError(f"cannot publish {src} as {dst}: {exc}") from exc
        self.delete(src)
        return True

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def info(self, path: str) -> FileInfo | None:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        return FileInfo(path, st.st_size, st.st_mtime)

    def list_dir(self, path: str) -> list[str]:
        """Names in the directory `path`; [] when it does not exist."""
        try:
            return sorted(os.listdir(path))
        except FileNotFoundError:
            return []

    def walk_files(self, path: str) -> Iterator[str]:
        for folder, _dirs, names in os.walk(path):
            for name in names:
                yield os.path.join(folder, name)

    def delete(self, path: str) -> bool:
        """Remove a file. True if it was there."""
        try:
            os.unlink(path)
        except FileNotFoundError:
            return False
        except OSError as exc:
            if exc.errno == errno.EISDIR:
                raise WarehouseError(f"refusing to delete directory {path}") from exc
            raise WarehouseError(f"cannot delete {path}: {exc}") from exc
        return True

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)


def filesystem_for(warehouse) -> LocalFileSystem:
    """The filesystem client for a WarehouseConfig; cheap, so tasks build their own."""
    if warehouse.url.startswith("file://"):
        return LocalFileSystem()
    raise WarehouseError(f"unsupported warehouse url {warehouse.url!r}; use file:///absolute/path")
