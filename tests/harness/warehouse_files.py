"""The warehouse on disk: temp files, final files and what is wrong with them."""
from __future__ import annotations

import collections
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

TEMP_PREFIX = "_tmp."
FINAL_RE = re.compile(r"^(?P<topic>[A-Za-z0-9._-]+)\+(?P<partition>\d+)\+(?P<start>\d{20})\+(?P<end>\d{20})\.parquet$")


def temp_files(warehouse_dir: Path | str) -> list[Path]:
    root = Path(warehouse_dir)
    return sorted(p for p in root.rglob(f"{TEMP_PREFIX}*")) if root.exists() else []


@dataclass(frozen=True)
class FinalFile:
    path: Path
    topic: str
    partition: int
    start: int
    end: int


def final_files(table_root: Path | str) -> list[FinalFile]:
    root = Path(table_root)
    found = []
    if root.exists():
        for path in root.rglob("*.parquet"):
            if path.name.startswith(("_", ".")):  # temp files (and what Hive skips), whatever they end in
                continue
            match = FINAL_RE.match(path.name)
            if match:
                found.append(FinalFile(path, match["topic"], int(match["partition"]), int(match["start"]),
                                       int(match["end"])))
    return sorted(found, key=lambda f: (f.topic, f.partition, f.start, f.end))


def table_root(warehouse_dir: Path | str, database: str, table: str) -> Path:
    return Path(warehouse_dir) / f"{database}.db" / table


def file_problems(warehouse_dir: Path | str, database: str, table: str, ends: dict | None = None,
                  committed: dict | None = None) -> list[str]:
    """What is wrong with the final files: overlapping or gapped ranges per partition, a file
    (plus its rejected twin) whose row count is not end - start, coverage short of `ends`
    (all files must be there) or of `committed` (committed offsets must be covered)."""
    problems = []
    main_root, rejected_root = table_root(warehouse_dir, database, table), table_root(
        warehouse_dir, database, f"{table}_rejected")
    rejected = {(f.path.relative_to(rejected_root)): f for f in final_files(rejected_root)}
    by_partition = collections.defaultdict(list)
    for f in final_files(main_root):
        by_partition[(f.topic, f.partition)].append(f)
        rows = pq.ParquetFile(f.path).metadata.num_rows
        twin = rejected.get(f.path.relative_to(main_root))
        rows += pq.ParquetFile(twin.path).metadata.num_rows if twin else 0
        if rows != f.end - f.start:
            problems.append(f"{f.path.name}: {rows} rows (main + rejected) for {f.end - f.start} offsets")
    for key, files in by_partition.items():
        position = 0
        for f in files:
            if f.start != position:
                kind = "overlap" if f.start < position else "gap"
                problems.append(f"{key[0]}[{key[1]}]: {kind} before {f.path.name} (covered up to {position})")
            position = max(position, f.end)
        if ends is not None and position != ends.get(key, 0):
            problems.append(f"{key[0]}[{key[1]}]: files cover [0, {position}), produced end is {ends.get(key)}")
        if committed is not None and position < committed.get(key, 0):
            problems.append(f"{key[0]}[{key[1]}]: files cover [0, {position}) but {committed[key]} is committed")
    for key, end in (ends or {}).items():
        if end and key not in by_partition:
            problems.append(f"{key[0]}[{key[1]}]: no file at all, produced end is {end}")
    for key, value in (committed or {}).items():
        if value and key not in by_partition:
            problems.append(f"{key[0]}[{key[1]}]: no file at all, but {value} is committed")
    return problems


def partition_path(table_dir: Path | str, partition_values: dict[str, str]) -> str:
    return posixpath.join(str(table_dir), "/".join(f"{k}={v}" for k, v in partition_values.items()))
