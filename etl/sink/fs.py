"""The warehouse filesystem: the handful of operations the commit protocol needs.

Two backends implement it with the same contract (tests/test_fs_contract.py runs one suite
against both): LocalFileSystem here (file:///...) and etl.sink.webhdfs.WebHdfsFileSystem
(webhdfs://... and swebhdfs://..., for HDFS). `filesystem_for` picks one from the
WarehouseConfig alone, so the driver and every Spark task build the same kind of client.

`rename_no_replace` is the commit point of every file. It must be atomic and must never
overwrite: POSIX rename(2) silently replaces, so the local backend links the temp file to
its final name (link(2) fails with EEXIST) and then unlinks the temp name.

Errors are WarehouseError. The two that callers may want to tell apart also derive from the
matching builtin, so code written against plain files keeps working: PathExists is a
FileExistsError (open_write on an existing path) and PathNotFound a FileNotFoundError
(open_read of a missing file).
"""
from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from typing import BinaryIO, Iterator, Protocol

from etl.errors import WarehouseError


class PathExists(WarehouseError, FileExistsError):
    """The path to create already exists; nothing was written to it."""


class PathNotFound(WarehouseError, FileNotFoundError):
    """The path to read does not exist."""


@dataclass(frozen=True)
class FileInfo:
    path: str
    size: int
    modified: float  # seconds since the epoch


class WarehouseFileSystem(Protocol):
    """What every backend offers. Paths are absolute POSIX paths on that filesystem."""

    scheme: str

    def open_write(self, path: str) -> BinaryIO:
        """Create `path` (and missing parent folders) for writing; PathExists if it exists.
        The bytes are complete, and visible to readers, only once close() has returned."""

    def open_read(self, path: str) -> BinaryIO:
        """A seekable binary reader; PathNotFound if `path` does not exist."""

    def rename_no_replace(self, src: str, dst: str) -> bool:
        """Atomically publish src as dst: True if done, False if dst already existed (then
        nothing changed). WarehouseError, naming both, if src is missing or it failed."""

    def exists(self, path: str) -> bool: ...

    def info(self, path: str) -> FileInfo | None: ...

    def list_dir(self, path: str) -> list[str]:
        """Sorted names in the folder; [] when it does not exist."""

    def walk_files(self, path: str) -> Iterator[str]:
        """Paths of all files under the folder, at any depth; nothing when it does not exist."""

    def delete(self, path: str) -> bool:
        """Remove a file: True if it was there. Refuses folders."""

    def makedirs(self, path: str) -> None:
        """Create the folder and its parents; fine if it exists."""


class LocalFileSystem:
    """The embedded default backend (file:///...). Safe to pickle into Spark tasks."""

    scheme = "file"

    def open_write(self, path: str) -> BinaryIO:
        self.makedirs(os.path.dirname(path))
        try:
            return open(path, "xb")
        except FileExistsError as exc:
            raise PathExists(f"cannot create {path}: it already exists; it was left as it is") from exc
        except OSError as exc:
            raise WarehouseError(f"cannot create {path}: {exc}") from exc

    def open_read(self, path: str) -> BinaryIO:
        try:
            return open(path, "rb")
        except FileNotFoundError as exc:
            raise PathNotFound(f"cannot read {path}: it does not exist") from exc
        except OSError as exc:
            raise WarehouseError(f"cannot read {path}: {exc}") from exc

    def rename_no_replace(self, src: str, dst: str) -> bool:
        """Publish src as dst. True if dst was created, False if dst already existed."""
        try:
            os.link(src, dst)
        except FileExistsError:
            return False
        except FileNotFoundError as exc:
            raise WarehouseError(f"cannot publish {src} as {dst}: {src} does not exist"
                                 f"{'' if os.path.isdir(os.path.dirname(dst)) else ' (nor does the folder of ' + dst + ')'}"
                                 f"; it was never written or another process removed it") from exc
        except OSError as exc:
            raise WarehouseError(f"cannot publish {src} as {dst}: {exc}") from exc
        _fsync_dir(os.path.dirname(dst))  # the new name must survive a power loss: offsets are committed next
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
        except OSError as exc:
            raise WarehouseError(f"cannot list {path}: {exc}") from exc

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
            if exc.errno == errno.EISDIR or os.path.isdir(path):
                raise WarehouseError(f"refusing to delete directory {path}") from exc
            raise WarehouseError(f"cannot delete {path}: {exc}") from exc
        return True

    def makedirs(self, path: str) -> None:
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as exc:
            raise WarehouseError(f"cannot create folder {path}: {exc}; check that no file is in the way") from exc


def filesystem_for(warehouse) -> WarehouseFileSystem:
    """The filesystem client for a WarehouseConfig; cheap, so tasks build their own."""
    scheme = warehouse.url.split("://", 1)[0] if "://" in warehouse.url else ""
    if scheme == "file":
        return LocalFileSystem()
    if scheme in ("webhdfs", "swebhdfs"):
        from etl.sink.webhdfs import WebHdfsFileSystem  # imports HdfsCLI only where it is used
        return WebHdfsFileSystem(warehouse)
    raise WarehouseError(f"unsupported warehouse url {warehouse.url!r}; use file:///absolute/path, "
                         f"webhdfs://namenode:port/absolute/path or swebhdfs://namenode:port/absolute/path")


def _fsync_dir(path: str) -> None:
    descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
