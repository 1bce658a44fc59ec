"""Names of the warehouse's data files, temp files and partition folders, built and parsed in one
place. The other names there belong to the room that writes them: range manifests
(etl.sink.manifest), `_SUCCESS` markers (etl.sink.markers), files moved aside (etl.sink.aside)
and compacted folders (etl.model.compaction).

A committed file is `<topic>+<partition>+<from:020d>+<until:020d>.parquet`. The offsets are
zero-padded so that a plain sort of the names is an offset sort. A file of a recreated topic's
later incarnation (etl.model.identity) carries that incarnation's tag after its offsets,
`<topic>+<partition>+<from:020d>+<until:020d>+<tag>.parquet`: its offsets restart at 0 and
would otherwise take the old incarnation's names. The first incarnation's files keep the plain
name, so every name written before incarnations were named still parses, as the first's.

Temp files start with `_`, which Hive and Spark skip, and end in `.inprogress`, so that a reader's `*.parquet` glob
(DuckDB, pyarrow), which skips no `_` name, does not match them either. They sit beside their
final name so that the publishing rename never crosses a directory or filesystem.
"""
from __future__ import annotations

import posixpath
import re
import uuid
from dataclasses import dataclass

EXTENSION = ".parquet"
TEMP_PREFIX = "_tmp."
TEMP_SUFFIX = ".inprogress"
# A topic may not start with '_' or '.' (the config refuses it: Hive would hide its files),
# so a temp name can never parse as a committed one.
# A tag is INCARNATION_LENGTH characters of the base64url alphabet Kafka prints topic ids in.
INCARNATION_LENGTH = 11
_TAG = rf"[A-Za-z0-9_-]{{{INCARNATION_LENGTH}}}"
_TAG_RE = re.compile(_TAG)
_FINAL_RE = re.compile(r"^(?P<topic>[A-Za-z0-9-][A-Za-z0-9._-]*)\+(?P<partition>\d+)"
                       r"\+(?P<start>\d{20})\+(?P<end>\d{20})"
                       rf"(?:\+(?P<incarnation>{_TAG}))?\.parquet$")


@dataclass(frozen=True, order=True)
class FileRange:
    topic: str
    partition: int
    start: int
    end: int
    incarnation: str = ""  # the topic's incarnation: "" for the first the job loaded (etl.model.identity)

    @property
    def name(self) -> str:
        return final_name(self.topic, self.partition, self.start, self.end, self.incarnation)


def final_name(topic: str, partition: int, start: int, end: int, incarnation: str = "") -> str:
    if incarnation and not _TAG_RE.fullmatch(incarnation):
        raise ValueError(f"{incarnation!r} is not an incarnation tag "
                         f"({INCARNATION_LENGTH} characters of [A-Za-z0-9_-])")
    tag = f"+{incarnation}" if incarnation else ""
    return f"{topic}+{partition}+{start:020d}+{end:020d}{tag}{EXTENSION}"


def parse_final_name(name: str) -> FileRange | None:
    """The range a committed file covers, or None if `name` is not a committed file."""
    match = _FINAL_RE.match(name)
    if not match:
        return None
    return FileRange(match["topic"], int(match["partition"]), int(match["start"]), int(match["end"]),
                     match["incarnation"] or "")


def temp_name(final: str) -> str:
    """A unique temp name per attempt, so that racing attempts never share a temp file."""
    return f"{TEMP_PREFIX}{uuid.uuid4().hex}.{final}{TEMP_SUFFIX}"


def is_temp_name(name: str) -> bool:
    """By the prefix alone: temp files that older versions left, without the suffix, are
    swept as well."""
    return name.startswith(TEMP_PREFIX)


def table_location(warehouse_root: str, database: str, table: str) -> str:
    return posixpath.join(warehouse_root, f"{database}.db", table)


def partition_dir(table_root: str, partition_values: dict[str, str]) -> str:
    return posixpath.join(table_root, partition_path(partition_values))


def partition_path(partition_values: dict[str, str]) -> str:
    return "/".join(f"{k}={v}" for k, v in partition_values.items())


def partition_values(path: str) -> dict[str, str]:
    """The values of a partition path: partition_path's inverse."""
    return dict(part.split("=", 1) for part in path.split("/"))
