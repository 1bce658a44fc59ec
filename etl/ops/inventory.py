"""What the warehouse holds for one job: committed files, rejected files and temp files.

Built from file names alone (they encode topic+partition+from+until), so taking stock of a
table costs one directory listing per Hive partition and reads no data. By event time a range
has a file in each Hive partition it touched (all with its name) and a manifest under
`_etl_ranges/` (etl.sink.manifest); the manifests are listed by name too.
"""
from __future__ import annotations

import posixpath
from collections import defaultdict
from dataclasses import dataclass, field

from etl.model.naming import FileRange, is_temp_name, parse_final_name
from etl.sink.fs import WarehouseFileSystem
from etl.sink.manifest import SUFFIX as MANIFEST_SUFFIX


@dataclass(frozen=True)
class WarehouseFile:
    path: str
    partition_path: str  # e.g. dt=2026-11-21/hour=10
    range: FileRange


@dataclass
class Inventory:
    files: list[WarehouseFile] = field(default_factory=list)
    rejected: list[WarehouseFile] = field(default_factory=list)
    temps: list[str] = field(default_factory=list)
    manifests: dict[FileRange, str] = field(default_factory=dict)  # range -> its manifest's path

    def by_partition(self) -> dict[tuple[str, int], list[WarehouseFile]]:
        """Committed files of each Kafka partition, in offset order."""
        grouped: dict[tuple[str, int], list[WarehouseFile]] = defaultdict(list)
        for f in self.files:
            grouped[(f.range.topic, f.range.partition)].append(f)
        return {key: sorted(files, key=lambda f: (f.range.start, f.range.end)) for key, files in grouped.items()}


def take_inventory(fs: WarehouseFileSystem, table_root: str, rejected_root: str) -> Inventory:
    inventory = Inventory()
    for root, target in ((table_root, inventory.files), (rejected_root, inventory.rejected)):
        for path in fs.walk_files(root):
            name = posixpath.basename(path)
            if is_temp_name(name):
                inventory.temps.append(path)
                continue
            if name.endswith(MANIFEST_SUFFIX) and root == table_root:
                manifest_range = parse_final_name(name.removesuffix(MANIFEST_SUFFIX) + ".parquet")
                if manifest_range is not None:
                    inventory.manifests[manifest_range] = path
                continue
            file_range = parse_final_name(name)
            if file_range is not None:
                target.append(WarehouseFile(path, posixpath.relpath(posixpath.dirname(path), root), file_range))
    return inventory
