"""The local-disk backend of the warehouse filesystem (file:///...), the embedded default.

`rename_no_replace` is the commit point of every file. It must be atomic and must never
overwrite: POSIX rename(2) silently replaces, so the local backend asks Linux's renameat2(2)
with RENAME_NOREPLACE (fails with EEXIST), one atomic step: the file is under exactly one of
its names at every instant, which a move between two registered partitions' folders
(etl.ops.legacy_names) needs, or a query would read its rows twice. Where the filesystem or
the kernel lacks it (EINVAL, ENOSYS), it links the file to its new name (link(2) fails with
EEXIST) and then unlinks the old one: a kill in between leaves both names, harmless for a
temp file's publication (a temp name is hidden from readers), and repaired by `etl recover`
for a move (docs/operating.md, Known limits).
"""
from __future__ import annotations

import ctypes
import errno
import os
from typing import BinaryIO, Iterator

from etl import faults
from etl.errors import WarehouseError
from etl.sink.fs.base import FileInfo, PathExists, PathNotFound


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
            if not _rename_noreplace(src, dst):
                os.link(src, dst)  # the filesystem cannot: two steps, see the module's docstring
                _fsync_dir(os.path.dirname(dst))
                faults.checkpoint("local:linked")
                self.delete(src)
        except FileExistsError:
            return False
        except FileNotFoundError as exc:
            raise WarehouseError(f"cannot publish {src} as {dst}: {src} does not exist"
                                 f"{'' if os.path.isdir(os.path.dirname(dst)) else f' (nor does the folder of {dst})'}"
                                 f"; it was never written or another process removed it") from exc
        except OSError as exc:
            raise WarehouseError(f"cannot publish {src} as {dst}: {exc}") from exc
        _fsync_dir(os.path.dirname(dst))  # the new name must survive a power loss: offsets are committed next
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

    def list_files(self, path: str) -> list[FileInfo]:
        try:
            with os.scandir(path) as entries:
                found = [FileInfo(entry.path, stat.st_size, stat.st_mtime)
                         for entry in entries if entry.is_file() for stat in (entry.stat(),)]
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise WarehouseError(f"cannot list {path}: {exc}") from exc
        return sorted(found, key=lambda info: info.path)

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


_AT_FDCWD = -100  # <fcntl.h>: paths relative to the working folder
_RENAME_NOREPLACE = 1  # <linux/fs.h>
_UNSUPPORTED = (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP)
_renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)  # glibc 2.28+


def _rename_noreplace(src: str, dst: str) -> bool:
    """Move src to dst in one atomic step unless dst exists (FileExistsError); False when this
    filesystem, kernel or C library cannot, and nothing was done."""
    if _renameat2 is None:
        return False
    if _renameat2(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), _RENAME_NOREPLACE) == 0:
        return True
    code = ctypes.get_errno()
    if code in _UNSUPPORTED:
        return False
    raise OSError(code, os.strerror(code), src, None, dst)


def _fsync_dir(path: str) -> None:
    descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
