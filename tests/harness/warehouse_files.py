"""The warehouse on disk: temp files, final files and what is wrong with them."""
from __future__ import annotations

import collections
import datetime as dt
import json
import os
import posixpath
import re
import zoneinfo
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq

TEMP_PREFIX = "_tmp."
# A main table's files in these tests: .parquet, or .orc under ETL_TEST_FILE_FORMAT=orc
# (tests.harness.config_file); a rejected table's are always .parquet.
DATA_SUFFIX = f".{os.environ.get('ETL_TEST_FILE_FORMAT') or 'parquet'}"
# A table's files are Parquet, or ORC for [hive] format = orc; the rejected table's are Parquet.
FINAL_RE = re.compile(r"^(?P<topic>[A-Za-z0-9._-]+)\+(?P<partition>\d+)\+(?P<start>\d{20})\+(?P<end>\d{20})"
                      r"\.(?:parquet|orc)$")


def file_rows(path: Path) -> int:
    return orc.ORCFile(str(path)).nrows if path.suffix == ".orc" else pq.ParquetFile(path).metadata.num_rows


def file_footer(path: Path) -> dict:
    """The file's key-value metadata: Parquet's footer's, or ORC's user metadata."""
    return (orc.ORCFile(str(path)).metadata if path.suffix == ".orc" else pq.ParquetFile(path).metadata.metadata) or {}


def read_file(path: Path, columns: list[str]) -> pa.Table:
    return orc.read_table(str(path), columns=columns) if path.suffix == ".orc" else pq.read_table(path, columns=columns)


def temp_files(warehouse_dir: Path | str) -> list[Path]:
    root = Path(warehouse_dir)
    return sorted(p for p in root.rglob(f"{TEMP_PREFIX}*")) if root.exists() else []


@dataclass(frozen=True)
class FinalFile:
    """A committed file, or one range of a compacted file (`merged`: its footer lists several)."""

    path: Path
    topic: str
    partition: int
    start: int
    end: int
    merged: bool = False

    @property
    def rows(self) -> int:
        """Rows of this range in the file: a compacted file's rows are told apart by offset."""
        if not self.merged:
            return file_rows(self.path)
        offsets = read_file(self.path, ["kafka_offset"]).column("kafka_offset").to_pylist()
        return sum(1 for o in offsets if self.start <= o < self.end)


def final_files(table_root: Path | str) -> list[FinalFile]:
    """Every committed file under the table's folder, a compacted one once per range it holds.
    After a compaction's grace period only the folders Hive reads hold files (its tests run the
    oracle then: during it, the replaced files and the merged ones are both on disk)."""
    root = Path(table_root)
    found = []
    if root.exists():
        for path in (p for p in root.rglob("*") if p.suffix in (".parquet", ".orc")):
            if path.name.startswith(("_", ".")):  # temp files (and what Hive skips), whatever they end in
                continue
            match = FINAL_RE.match(path.name)
            if match:
                footer = file_footer(path)
                ranges = json.loads(footer[b"etl.ranges"]) if b"etl.ranges" in footer else None
                for start, end in ranges or [(int(match["start"]), int(match["end"]))]:
                    found.append(FinalFile(path, match["topic"], int(match["partition"]), start, end,
                                           merged=ranges is not None))
    return sorted(found, key=lambda f: (f.topic, f.partition, f.start, f.end))


def table_root(warehouse_dir: Path | str, database: str, table: str) -> Path:
    return Path(warehouse_dir) / f"{database}.db" / table


def file_problems(warehouse_dir: Path | str, database: str, table: str, ends: dict | None = None,
                  committed: dict | None = None, by_event_time: bool = False,
                  tables: tuple[str, ...] = (), rejected_table: str | None = None,
                  split_topics: frozenset[str] = frozenset()) -> list[str]:
    """What is wrong with the final files: overlapping or gapped ranges per partition, a range
    whose files (its parts in every Hive partition, plus its rejected twin) hold another number
    of rows than end - start, coverage short of `ends` (all files must be there) or of
    `committed` (committed offsets must be covered). `tables`: a routed job's tables, taken as
    one (a range written into two of them is an overlap), instead of `table`; `rejected_table`:
    the job's rejected table, when it is not `<table>_rejected`; `split_topics`: topics whose
    ranges have a file in each of their tables (split by a field), each range counted once."""
    problems = []
    main_roots = [table_root(warehouse_dir, database, name) for name in tables or (table,)]
    rejected_root = table_root(warehouse_dir, database, rejected_table or f"{table}_rejected")
    files_of = {root: final_files(root) for root in main_roots}
    rows_of = collections.Counter()
    for f in [f for files in files_of.values() for f in files] + final_files(rejected_root):
        rows_of[(f.topic, f.partition, f.start, f.end)] += f.rows
    # A range once per table (by event time its parts share its name), and once more per other table it is in.
    ranges = [key for files in files_of.values() for key in {(f.topic, f.partition, f.start, f.end) for f in files}]
    ranges = [k for k in ranges if k[0] not in split_topics] + list({k for k in ranges if k[0] in split_topics})
    by_partition = collections.defaultdict(list)
    for key in sorted(ranges):
        by_partition[key[:2]].append(key)
        short_but_half_published = (rows_of[key] < key[3] - key[2] and by_event_time
                                    and _half_published([*main_roots, rejected_root], key, committed))
        if rows_of[key] != key[3] - key[2] and not short_but_half_published:
            problems.append(f"{key}: {rows_of[key]} rows (main parts + rejected) for {key[3] - key[2]} offsets")
    for key, ranges in by_partition.items():
        position = 0
        for _t, _p, start, end in ranges:
            if start != position:
                kind = "overlap" if start < position else "gap"
                problems.append(f"{key[0]}[{key[1]}]: {kind} before [{start}, {end}) (covered up to {position})")
            position = max(position, end)
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


def _half_published(roots: list[Path], key: tuple, committed: dict | None) -> bool:
    """Whether `key`'s range is legitimately incomplete at this moment: a range by event time
    publishes its files one rename at a time and its manifest last, so a SIGKILL between two
    renames leaves some of its files and no manifest. Only while it is not committed (`committed`
    given: an interim check) does that hold; the replay then publishes the rest. `roots`: where
    its manifest may be (a one-table or whole-routed range's in its table, a split range's in
    the rejected table)."""
    from etl.sink.manifest import manifest_path
    if committed is None or key[2] < committed.get(key[:2], 0):
        return False
    return not any(Path(manifest_path(str(root), *key)).exists() for root in roots)


def misplaced_rows(table_dir: Path | str, column: str, zone: str) -> list[str]:
    """Rows whose folder (dt=.../hour=...) is not the wall clock of their event time in `zone`,
    computed here with zoneinfo, independently of the ETL's own Arrow code. NULL times are
    skipped (placed by on_missing_event_time = planning_time)."""
    problems = []
    tz = zoneinfo.ZoneInfo(zone)
    for f in {f.path: f for f in final_files(table_dir)}.values():  # a compacted file once
        # a compacted folder is _compacted/dt=.../hour=.../c<id>: its partition is its k=v parts
        folder = dict(part.split("=", 1) for part in f.path.parent.relative_to(table_dir).parts if "=" in part)
        table = read_file(f.path, [column, "kafka_offset"])
        for at, offset in zip(table.column(column).to_pylist(), table.column("kafka_offset").to_pylist()):
            if at is None:
                continue
            wall = at.replace(tzinfo=dt.timezone.utc).astimezone(tz)
            want = {"dt": wall.strftime("%Y-%m-%d"), **({"hour": wall.strftime("%H")} if "hour" in folder else {})}
            if want != folder:
                problems.append(f"{f.topic}[{f.partition}] offset {offset} ({column} {at} UTC) is in {folder}, "
                                f"its event time says {want}")
    return problems


def partition_path(table_dir: Path | str, partition_values: dict[str, str]) -> str:
    return posixpath.join(str(table_dir), "/".join(f"{k}={v}" for k, v in partition_values.items()))
