"""The warehouse filesystem contract: the handful of operations the commit protocol needs.

Every backend implements WarehouseFileSystem with the same semantics (test_fs_contract.py
runs one suite against all of them), and every `fs` parameter in etl is typed with it, so the
code above never depends on a backend. The backends import this module, never the factory;
the factory imports the backends.

`rename_no_replace` is the commit point of every file. It must be atomic and must never
overwrite.

Errors are WarehouseError. The two that callers may want to tell apart also derive from the
matching builtin, so code written against plain files keeps working: PathExists is a
FileExistsError (open_write on an existing path) and PathNotFound a FileNotFoundError
(open_read of a missing file).
"""
from __future__ import annotations

import io
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

    def list_files(self, path: str) -> list[FileInfo]:
        """The files directly in the folder with their sizes, in one listing (one WebHDFS
        request, not one per file), sorted by path; [] when it does not exist."""

    def walk_files(self, path: str) -> Iterator[str]:
        """Paths of all files under the folder, at any depth; nothing when it does not exist."""

    def delete(self, path: str) -> bool:
        """Remove a file: True if it was there. Refuses folders."""

    def makedirs(self, path: str) -> None:
        """Create the folder and its parents; fine if it exists."""


def close_durably(file: BinaryIO) -> None:
    """Close a file just written so that its bytes survive a crash: the offsets committed after
    it rely on them."""
    file.flush()
    try:
        os.fsync(file.fileno())
    except (AttributeError, io.UnsupportedOperation):
        pass  # not a local file: its own close() is the durability point
    file.close()
