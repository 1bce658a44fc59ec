"""Which backend serves a warehouse: picked from the WarehouseConfig url alone, so the driver
and every Spark task build the same kind of client.

The top of the package: it imports the backends, and no backend imports it.
"""
from __future__ import annotations

from etl.config import WarehouseConfig
from etl.errors import WarehouseError
from etl.sink.fs.base import WarehouseFileSystem
from etl.sink.fs.local import LocalFileSystem


def filesystem_for(warehouse: WarehouseConfig) -> WarehouseFileSystem:
    """The filesystem client for a WarehouseConfig; cheap, so tasks build their own."""
    scheme = warehouse.url.split("://", 1)[0] if "://" in warehouse.url else ""
    if scheme == "file":
        return LocalFileSystem()
    if scheme in ("webhdfs", "swebhdfs"):
        from etl.sink.fs.webhdfs import WebHdfsFileSystem  # imports HdfsCLI only where it is used
        return WebHdfsFileSystem(warehouse)
    raise WarehouseError(f"unsupported warehouse url {warehouse.url!r}; use file:///absolute/path, "
                         f"webhdfs://namenode:port/absolute/path or swebhdfs://namenode:port/absolute/path")
