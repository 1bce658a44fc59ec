"""A range's manifest: the record that every file of an event-time range is published.

Under event-time partitioning one offset range has a file in each Hive partition its rows
fall in, all named after the range. A task publishes them one rename at a time, so a crash
can leave some published and some not. The manifest is published last, by the same
no-replace rename, and lists every part (partition, rows, late rows) and the rejected file:
  - manifest present: the range is done; a replay reads the manifest and writes nothing;
  - manifest absent: the range is not done, whatever parts are in place; the task runs again
    and splits the same rows the same way (the plan fixes the Placement), so the parts
    already published are found in place (same name, same rows) and only the rest is written.
So a half-published range is finished on resume, never duplicated and never skipped.

Manifests sit in `<table root>/_etl_ranges/<topic>+<partition>/`, outside every partition's
folder and under a name Hive and Spark skip. They stay: `etl verify` uses them to find a part
deleted by hand (the range's other parts still carry its name).
"""
from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass, field

from etl.errors import WarehouseError
from etl.model.naming import FileRange, range_stem, temp_name
from etl.model.partitioning import padded_path
from etl.sink.commit import publish
from etl.sink.fs import PathNotFound, WarehouseFileSystem

RANGES_DIR = "_etl_ranges"
SUFFIX = ".json"


@dataclass(frozen=True)
class Part:
    partition: str  # the Hive partition's path, e.g. dt=2026-11-24/hour=10
    rows: int
    late: int = 0  # rows in a partition already due its _SUCCESS when the batch was planned
    table: str = ""  # a field split's: the table the part is in ("" for the range's own table)


@dataclass(frozen=True)
class RangeManifest:
    topic: str
    partition: int
    start: int
    end: int
    parts: tuple[Part, ...]
    rejected: int = 0
    rejected_partition: str = ""  # where the rejected file is; "" when none was written
    unmatched: dict = field(default_factory=dict)  # joined dimension -> rows with no match
    ignored_fields: dict = field(default_factory=dict)  # writer-schema field the table lacks -> records
    max_event_ms: int | None = None  # the latest event time among the range's rows
    last_record: list | None = None  # etl.model.identity.RecordFingerprint json
    incarnation: str = ""  # the topic's incarnation (etl.model.identity): "" the first

    @property
    def file_range(self) -> FileRange:
        return FileRange(self.topic, self.partition, self.start, self.end, self.incarnation)

    @property
    def rows(self) -> int:
        return sum(p.rows for p in self.parts)

    def to_json(self) -> dict:
        raw = dict(self.__dict__)
        if not self.incarnation:  # as versions before incarnations wrote it
            del raw["incarnation"]
        raw["parts"] = [[p.partition, p.rows, p.late, *([p.table] if p.table else [])] for p in self.parts]
        return raw

    @classmethod
    def from_json(cls, raw: dict) -> "RangeManifest":
        # A part named before dt was zero-padded (dt=1-01-02) reads as its padded partition, where
        # `etl recover` or the range's resume moves it (etl.ops.legacy_names).
        parts = tuple(Part(padded_path(str(path)), int(rows), int(late), *table) for path, rows, late, *table
                      in raw["parts"])
        return cls(**{**raw, "parts": parts})


def manifest_dir(table_root: str, topic: str, partition: int) -> str:
    return posixpath.join(table_root, RANGES_DIR, f"{topic}+{partition}")


def manifest_path(table_root: str, topic: str, partition: int, start: int, end: int, incarnation: str = "") -> str:
    name = range_stem(topic, partition, start, end, incarnation) + SUFFIX
    return posixpath.join(manifest_dir(table_root, topic, partition), name)


def read_manifest(fs: WarehouseFileSystem, path: str) -> RangeManifest | None:
    """The manifest at `path`, or None when there is none. A manifest that cannot be read is an
    error: taking it for absent would rewrite a range that may be complete."""
    try:
        with fs.open_read(path) as handle:
            raw = handle.read()
    except PathNotFound:
        return None
    try:
        return RangeManifest.from_json(json.loads(raw))
    except (ValueError, KeyError, TypeError) as exc:
        raise WarehouseError(f"{path} is not a readable range manifest ({exc}); move it out of the warehouse "
                             f"and run `etl recover`, which rewrites the range") from exc


def publish_manifest(fs: WarehouseFileSystem, path: str, manifest: RangeManifest) -> bool:
    """Write the manifest under a temp name and publish it; False when it was already there."""
    temp = posixpath.join(posixpath.dirname(path), temp_name(posixpath.basename(path)))
    body = json.dumps(manifest.to_json(), sort_keys=True).encode()
    try:
        with fs.open_write(temp) as handle:
            handle.write(body)
    except BaseException:
        fs.delete(temp)
        raise
    return publish(fs, temp, path)


def list_manifests(fs: WarehouseFileSystem, table_root: str) -> list[RangeManifest]:
    """Every published manifest of the table (temp files skipped)."""
    found = []
    for path in fs.walk_files(posixpath.join(table_root, RANGES_DIR)):
        name = posixpath.basename(path)
        if name.endswith(SUFFIX) and not name.startswith("_"):
            found.append(read_manifest(fs, path))
    return [m for m in found if m is not None]
