"""What the warehouse holds for one job: committed files, rejected files and temp files.

Built from file names alone (they encode topic+partition+from+until, and a recreated topic's
incarnation: etl.model.naming), so taking stock of a
table costs one directory listing per Hive partition and reads no data. By event time a range
has a file in each Hive partition it touched (all with its name) and a manifest under
`_etl_ranges/` (etl.sink.manifest); the manifests are listed by name too. A range of a topic
split by a field (etl.job.route_task) has a file in each of its tables and its manifest under
the rejected table's `_etl_ranges/`. A routed job's tables are taken stock of one by one
(`kinds`) and then as one (`merged`).

A compacted partition's files are in the folder ZooKeeper's relocations name (etl.model.compaction):
there, a merged file is taken once per range its footer lists, so the checks see the same ranges
as before the compaction. Files in a partition's old folder, or in a compacted folder that is not
the partition's current one, are not the table's: `superseded`, waiting for deletion (or left over).
"""
from __future__ import annotations

import posixpath
from collections import defaultdict
from dataclasses import dataclass, field

from etl.compaction.merge import read_facts
from etl.model.compaction import TableKind, partition_of_folder
from etl.config.model import HiveFormat
from etl.model.naming import FileRange, is_temp_name, parse_final_name, parse_range_stem
from etl.model.partitioning import padded_path
from etl.sink.fs import WarehouseFileSystem
from etl.sink.manifest import SUFFIX as MANIFEST_SUFFIX
from etl.sink.warehouse import Warehouse


@dataclass(frozen=True)
class WarehouseFile:
    path: str
    partition_path: str  # e.g. dt=2026-11-21/hour=10
    range: FileRange
    file_format: HiveFormat = HiveFormat.PARQUET  # its table's


@dataclass
class Inventory:
    files: list[WarehouseFile] = field(default_factory=list)
    rejected: list[WarehouseFile] = field(default_factory=list)
    temps: list[str] = field(default_factory=list)
    manifests: dict[FileRange, str] = field(default_factory=dict)  # range -> its manifest's path
    superseded: list[str] = field(default_factory=list)  # committed files no partition reads from

    @property
    def paths(self) -> list[str]:
        """Each committed file once (a merged file is listed once per range it holds)."""
        return sorted(self.formats)

    @property
    def formats(self) -> dict[str, HiveFormat]:
        """Each committed file's format, by path."""
        return {f.path: f.file_format for f in self.files + self.rejected}

    def by_partition(self) -> dict[tuple[str, int], list[WarehouseFile]]:
        """Committed files of each Kafka partition, in offset order."""
        grouped: dict[tuple[str, int], list[WarehouseFile]] = defaultdict(list)
        for f in self.files:
            grouped[(f.range.topic, f.range.partition)].append(f)
        return {key: sorted(files, key=lambda f: (f.range.start, f.range.end)) for key, files in grouped.items()}


def take_inventory(fs: WarehouseFileSystem, warehouse: Warehouse,
                   kinds: tuple[TableKind, ...] = (TableKind.MAIN, TableKind.REJECTED)) -> Inventory:
    inventory = Inventory()
    for kind, target in ((TableKind.MAIN, inventory.files), (TableKind.REJECTED, inventory.rejected)):
        if kind not in kinds:
            continue
        root, relocated, file_format = warehouse.root(kind), warehouse.relocations.of(kind), warehouse.file_format(kind)
        current = {folder: partition for partition, folder in relocated.items()}
        for path in fs.walk_files(root):
            name = posixpath.basename(path)
            if is_temp_name(name):
                inventory.temps.append(path)
                continue
            if name.endswith(MANIFEST_SUFFIX):  # a split range's is in the rejected table's folder
                manifest_range = parse_range_stem(name.removesuffix(MANIFEST_SUFFIX))
                if manifest_range is not None:
                    inventory.manifests[manifest_range] = path
                continue
            file_range = parse_final_name(name, file_format)
            if file_range is None:
                continue
            folder = posixpath.relpath(posixpath.dirname(path), root)
            if folder in current:
                target += _ranges_of(fs, path, current[folder], file_range, file_format)
            elif folder in relocated or partition_of_folder(folder) is not None:
                inventory.superseded.append(path)
            else:
                # dt=1-01-02: as padded
                target.append(WarehouseFile(path, padded_path(folder), file_range, file_format))
    return inventory


def merged(inventories: list[Inventory]) -> Inventory:
    """Several tables' inventories as one: a routed job's tables and its rejected table."""
    whole = Inventory()
    for part in inventories:
        whole.files += part.files
        whole.rejected += part.rejected
        whole.temps += part.temps
        whole.manifests.update(part.manifests)
        whole.superseded += part.superseded
    return whole


def _ranges_of(fs: WarehouseFileSystem, path: str, partition: str, named: FileRange,
               file_format: HiveFormat) -> list[WarehouseFile]:
    """A file in a compacted folder: merged (its footer lists its ranges), or written there after."""
    try:
        ranges = read_facts(fs, path, file_format).ranges
    except Exception:  # unreadable: listed under its name, for `etl verify --deep` and `etl recover` to name
        ranges = None
    return [WarehouseFile(path, partition, FileRange(named.topic, named.partition, start, end, named.incarnation),
                          file_format) for start, end in ranges or [(named.start, named.end)]]
