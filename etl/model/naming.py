"""Names of the warehouse's data files, temp files and partition folders, built and parsed in one
place. The other names there belong to the room that writes them: range manifests
(etl.sink.manifest), `_SUCCESS` markers (etl.sink.markers), files moved aside (etl.sink.aside)
and compacted folders (etl.model.compaction).

A committed file is `<topic>+<partition>+<from:020d>+<until:020d>.parquet`, or `.orc` in a table
stored as ORC: a name says which format its file is in, and a range's file is looked for under
its table's extension only (a replay that looked for the other would write the range twice).
The rejected table's files are Parquet whatever the table's format. The offsets are
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

from etl.config.model import HiveFormat

EXTENSIONS = {HiveFormat.PARQUET: ".parquet", HiveFormat.ORC: ".orc"}
REJECTED_FORMAT = HiveFormat.PARQUET  # etl/hive/rejected.sql is one table definition for every job
TEMP_PREFIX = "_tmp."
TEMP_SUFFIX = ".inprogress"
# A topic may not start with '_' or '.' (the config refuses it: Hive would hide its files),
# so a temp name can never parse as a committed one.
# A tag is INCARNATION_LENGTH characters of the base64url alphabet Kafka prints topic ids in.
INCARNATION_LENGTH = 11
_TAG = rf"[A-Za-z0-9_-]{{{INCARNATION_LENGTH}}}"
_TAG_RE = re.compile(_TAG)
_STEM = (r"(?P<topic>[A-Za-z0-9-][A-Za-z0-9._-]*)\+(?P<partition>\d+)"
         rf"\+(?P<start>\d{{20}})\+(?P<end>\d{{20}})(?:\+(?P<incarnation>{_TAG}))?")
_STEM_RE = re.compile(rf"^{_STEM}$")
_FINAL_RE = {file_format: re.compile(rf"^{_STEM}{re.escape(extension)}$")
             for file_format, extension in EXTENSIONS.items()}


@dataclass(frozen=True, order=True)
class FileRange:
    topic: str
    partition: int
    start: int
    end: int
    incarnation: str = ""  # the topic's incarnation: "" for the first the job loaded (etl.model.identity)

    @property
    def stem(self) -> str:
        """The name without its format's extension: what a range's other records are named by."""
        return range_stem(self.topic, self.partition, self.start, self.end, self.incarnation)

    def name_as(self, file_format: HiveFormat) -> str:
        """The name of the range's file in a table whose files are `file_format`."""
        return self.stem + EXTENSIONS[file_format]


def range_stem(topic: str, partition: int, start: int, end: int, incarnation: str = "") -> str:
    if incarnation and not _TAG_RE.fullmatch(incarnation):
        raise ValueError(f"{incarnation!r} is not an incarnation tag "
                         f"({INCARNATION_LENGTH} characters of [A-Za-z0-9_-])")
    tag = f"+{incarnation}" if incarnation else ""
    return f"{topic}+{partition}+{start:020d}+{end:020d}{tag}"


def final_name(topic: str, partition: int, start: int, end: int, incarnation: str = "",
               file_format: HiveFormat = HiveFormat.PARQUET) -> str:
    return range_stem(topic, partition, start, end, incarnation) + EXTENSIONS[file_format]


def parse_final_name(name: str, file_format: HiveFormat = HiveFormat.PARQUET) -> FileRange | None:
    """The range a committed file of `file_format` covers, or None if `name` is not one: a file
    of the other format, in a table of this one, is not the table's."""
    return _range_of(_FINAL_RE[file_format].match(name))


def parse_range_stem(stem: str) -> FileRange | None:
    """The range a name's stem (FileRange.stem: a manifest's name, less its suffix) is of."""
    return _range_of(_STEM_RE.match(stem))


def _range_of(match: re.Match | None) -> FileRange | None:
    if not match:
        return None
    return FileRange(match["topic"], int(match["partition"]), int(match["start"]), int(match["end"]),
                     match["incarnation"] or "")


def format_of_name(name: str) -> HiveFormat | None:
    """The format a committed file's name says it is in; None if it is not a committed file."""
    return next((f for f, pattern in _FINAL_RE.items() if pattern.match(name)), None)


def name_stem(name: str) -> str:
    """A committed file's name without its format's extension."""
    return name.rsplit(".", 1)[0] if format_of_name(name) else name


def named_range(name: str) -> FileRange | None:
    """The range a committed file of either format covers: for names the job recorded itself
    (a compaction's inputs and outputs), whose table's format they were written in."""
    file_format = format_of_name(name)
    return None if file_format is None else parse_final_name(name, file_format)


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
