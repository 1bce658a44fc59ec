"""Where a job's files live: the same folders seen by the ETL's filesystem and by Hive.

The ETL writes through its warehouse filesystem (a local path, or a WebHDFS path); Hive
must be told the folder under its own URI (file:///..., hdfs://nameservice/...). Paths are
derived here once, from the config, and translated here only.

A job with [route] sections fills several tables: its Warehouse has no one table root, and the
code that acts on a table is handed that table's view (`for_table`).

A partition's folder is `<table root>/dt=…/hour=…` until a compaction moves it
(etl.model.compaction); `relocations`, read from ZooKeeper, says where each moved one is now.
"""
from __future__ import annotations

import posixpath
from dataclasses import dataclass, field, replace
from urllib.parse import urlsplit

from etl.config import Config
from etl.config.model import HiveFormat
from etl.errors import ConfigError
from etl.model.compaction import Relocations, TableKind
from etl.model.naming import REJECTED_FORMAT, partition_path, table_location


@dataclass(frozen=True)
class Warehouse:
    fs_root: str
    hive_root: str
    database_root: str
    table_root: str  # "" for a routed job's warehouse: each table's view has its own
    rejected_root: str
    relocations: Relocations = field(default_factory=Relocations)
    main_format: HiveFormat = HiveFormat.PARQUET  # the tables' files' ([hive] format); the rejected table's are Parquet

    @classmethod
    def of(cls, config: Config) -> "Warehouse":
        root, hive = config.warehouse.fs_root, config.hive
        return cls(fs_root=root, hive_root=config.warehouse.hive_root,
                   database_root=posixpath.join(root, f"{hive.database}.db"),
                   table_root="" if hive.table is None else table_location(root, hive.database, hive.table),
                   rejected_root=table_location(root, hive.database, hive.rejected_table), main_format=hive.format)

    def with_relocations(self, relocations: Relocations) -> "Warehouse":
        return replace(self, relocations=relocations)

    def for_table(self, table: str) -> "Warehouse":
        """One of a routed job's tables, beside the job's rejected table: its compacted partitions
        where that table's relocations say, the rejected ones where the job's say."""
        return replace(self, table_root=posixpath.join(self.database_root, table),
                       relocations=self.relocations.for_table(table))

    def view(self, table: str | None) -> "Warehouse":
        """A routed table's view by its name; None: this warehouse (a one-table job's, or the
        rejected table's)."""
        return self if table is None else self.for_table(table)

    def root(self, table: TableKind) -> str:
        if table is TableKind.REJECTED:
            return self.rejected_root
        if not self.table_root:
            raise ConfigError("[route] sections name the tables: this step acts on one table, and was handed the "
                              "job's warehouse instead of one table's view (a bug)")
        return self.table_root

    def file_format(self, table: TableKind) -> HiveFormat:
        return REJECTED_FORMAT if table is TableKind.REJECTED else self.main_format

    def folder(self, table: TableKind, partition: str | dict[str, str]) -> str:
        """Where a Hive partition's files are now (`partition`: a path, or its values)."""
        path = partition if isinstance(partition, str) else partition_path(partition)
        return posixpath.join(self.root(table), self.relocations.folder(table, path))

    def main_dir(self, partition: str | dict[str, str]) -> str:
        return self.folder(TableKind.MAIN, partition)

    def rejected_dir(self, partition: str | dict[str, str]) -> str:
        return self.folder(TableKind.REJECTED, partition)

    def partials_root(self, table: str) -> str:
        """A rollup's partials table's folder (etl.model.rollup_table), beside the job's tables."""
        return posixpath.join(self.database_root, table)

    def partials_dir(self, table: str, partition: str | dict[str, str]) -> str:
        """A partition's folder in a rollup's partials table: moved, as its data partition is, by
        a compaction that folds its partials (its relocations are filed under the table's name)."""
        path = partition if isinstance(partition, str) else partition_path(partition)
        return posixpath.join(self.partials_root(table), self.relocations.tables.get(table, {}).get(path, path))

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
