"""Where a job's files live: the same folders seen by the ETL's filesystem and by Hive.

The ETL writes through its warehouse filesystem (a local path, or a WebHDFS path); Hive
must be told the folder under its own URI (file:///..., hdfs://nameservice/...). Paths are
derived here once, from the config, and translated here only.
"""
from __future__ import annotations

import posixpath
from dataclasses import dataclass
from urllib.parse import urlsplit

from etl.config import Config
from etl.model.naming import table_location


@dataclass(frozen=True)
class Warehouse:
    fs_root: str
    hive_root: str
    database_root: str
    table_root: str
    rejected_root: str

    @classmethod
    def of(cls, config: Config) -> "Warehouse":
        root, hive = config.warehouse.fs_root, config.hive
        return cls(fs_root=root, hive_root=config.warehouse.hive_root,
                   database_root=posixpath.join(root, f"{hive.database}.db"),
                   table_root=table_location(root, hive.database, hive.table),
                   rejected_root=table_location(root, hive.database, hive.rejected_table))

    def hive_uri(self, fs_path: str) -> str:
        """The Hive LOCATION of a folder given as a warehouse filesystem path."""
        relative = posixpath.relpath(fs_path, self.fs_root)
        return self.hive_root if relative == "." else f"{self.hive_root}/{relative}"


def same_location(a: str, b: str) -> bool:
    """Whether two location URIs name the same folder: the metastore writes file:/x for
    file:///x, and may add or drop a trailing slash."""
    return _normalised(a) == _normalised(b)


def _normalised(uri: str) -> str:
    parts = urlsplit(uri.rstrip("/"))
    return f"{parts.scheme}://{parts.netloc}{posixpath.normpath(parts.path or '/')}"
