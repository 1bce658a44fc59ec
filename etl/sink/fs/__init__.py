"""The warehouse filesystems: one contract, one module per backend, one factory.

  base.py            the contract: WarehouseFileSystem, FileInfo, PathExists, PathNotFound
  local.py           LocalFileSystem (file:///...)
  webhdfs.py         WebHdfsFileSystem (webhdfs://, swebhdfs://, for HDFS)
  webhdfs_client.py  its HdfsCLI client, auth, its calls (public API but for CREATE), the map of errors
  webhdfs_io.py      its streamed upload and its ranged reader
  factory.py         filesystem_for: the backend for a WarehouseConfig

Backends import base only; factory imports the backends. WebHdfsFileSystem is not re-exported
here, so that importing the package does not import HdfsCLI.
"""
from etl.sink.fs.base import FileInfo, PathExists, PathNotFound, WarehouseFileSystem
from etl.sink.fs.factory import filesystem_for
from etl.sink.fs.local import LocalFileSystem

__all__ = ["FileInfo", "LocalFileSystem", "PathExists", "PathNotFound", "WarehouseFileSystem", "filesystem_for"]
