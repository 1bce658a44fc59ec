"""The atomic commit of one file: publish a finished temp file under its final name.

A final name is created exactly once. If it already exists, this attempt lost a race
with another attempt of the same range (Spark retry or speculation) or is a replay: the
existing file has the same content, so the temp file is dropped and the range is done.
"""
from __future__ import annotations

from etl.errors import WarehouseError
from etl.sink.fs import WarehouseFileSystem


def publish(fs: WarehouseFileSystem, temp_path: str, final_path: str) -> bool:
    """True if this call created final_path, False if it was already there."""
    if fs.rename_no_replace(temp_path, final_path):
        return True
    if not fs.exists(final_path):
        raise WarehouseError(f"rename of {temp_path} to {final_path} failed and the final file is absent")
    fs.delete(temp_path)
    return False
