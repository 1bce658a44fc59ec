"""Merging committed files into one, a row group at a time (for etl.compaction.compactor; the
ranges a footer lists are read back by etl.ops.inventory).

The inputs are read a row group (Parquet) or stripe (ORC) at a time and appended to one sink of
the table's format, so memory stays bounded by a part or two whatever the partition holds. The
merged file's footer lists every offset range it holds (`etl.ranges`), which is how `etl verify` and `etl recover` see
the ranges of a compacted partition, and sums the inputs' counters (`etl.ignored_fields`, ...).
Files written before a column was added lack it: it is NULL in their rows, as Hive reads them.

Parquet's timestamps are INT96 (or, for a table of current readers, INT64 microseconds:
etl.sink.layout), read as microseconds (etl.sink.file_format): pyarrow's default for INT96,
nanoseconds, holds only 1677-09-21 .. 2262-04-11 and silently wrapped the rest (9999-12-30 was
written back as 1816-03-28). The merged
file is published only once its values are proven to be its inputs' (etl.sink.checksums): their
checksums, taken by a read of their own, are recorded in its footer (`etl.checksums`) and
compared with the merged file read back.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Collection, Mapping

import pyarrow as pa

from etl.config.model import HiveFormat
from etl.errors import WarehouseError
from etl.sink.checksums import CHECKSUMS_KEY, Checksums, TableDigest, digest_file, file_checksums, recorded
from etl.sink.file_format import open_data, open_sink, read_footer
from etl.sink.fs import WarehouseFileSystem
from etl.sink.layout import FileLayout

RANGES_KEY = b"etl.ranges"
INT96_UNIT = "us"  # every year 0001..9999 Hive accepts; "ns" (pyarrow's default) ends in 2262
_ALTERED_ACTION = ("nothing was published and the partition is left as it was. If an input is named, it was changed "
                   "after it was written: move it out of the warehouse and run `etl recover`, which rewrites its "
                   "ranges from Kafka; otherwise the merge itself is at fault: report it, with this message")


class MergeAltered(WarehouseError):
    """A merge's output (or an input it was given) does not hold the values its checksums say."""


@dataclass(frozen=True)
class FileFacts:
    """What a committed file's footer says: rows, and the ranges of a merged file (None for a
    batch's own file, whose name is its one range)."""

    rows: int
    ranges: list[tuple[int, int]] | None


def read_facts(fs: WarehouseFileSystem, path: str, file_format: HiveFormat) -> FileFacts:
    footer = read_footer(fs, path, file_format)
    return FileFacts(footer.rows, _ranges(footer.metadata))


def _ranges(footer: Mapping[bytes, bytes]) -> list[tuple[int, int]] | None:
    raw = footer.get(RANGES_KEY)
    return None if raw is None else [(int(a), int(b)) for a, b in json.loads(raw)]


def merge_files(fs: WarehouseFileSystem, sources: list[str], target: str, ranges: list[tuple[int, int]],
                row_group_size: int, layout: FileLayout, proven: Collection[str] = ()) -> int:
    """Write the rows of `sources`, in order, into `target` (a temp name); return its rows.
    Its row count and every column's checksum are checked against the inputs' before the caller
    publishes it: MergeAltered (and `target` deleted) if any differs. `proven`: the sources that
    must record checksums, as their own compaction's record in ZooKeeper says."""
    file_format = layout.file_format  # the inputs' and the output's: the table's
    schema = _merged_schema(fs, sources, file_format)
    expected = inputs_checksums(fs, sources, schema, file_format, proven)
    sink = open_sink(fs, target, schema, row_group_size, layout.unsorted())
    rows, counters = 0, {}
    try:
        for source in sources:
            with open_data(fs, source, file_format, INT96_UNIT) as data:
                rows += data.footer.rows
                _add_counters(counters, data.footer.metadata)
                for table in data.tables():
                    sink.append(_conformed(table, schema))
        sink.metadata = {RANGES_KEY: json.dumps([list(r) for r in ranges]).encode(),
                         CHECKSUMS_KEY: expected.to_footer(),
                         **{key: json.dumps(value, sort_keys=True).encode() for key, value in counters.items()}}
        sink.close()
    except BaseException:
        sink.abort()
        raise
    if sink.rows_appended != rows:
        fs.delete(target)
        raise WarehouseError(f"merging into {target} wrote {sink.rows_appended} rows, its inputs hold {rows}")
    _check_written(fs, target, schema, expected, file_format)
    return rows


def inputs_checksums(fs: WarehouseFileSystem, sources: list[str], schema: pa.Schema, file_format: HiveFormat,
                     proven: Collection[str] = ()) -> Checksums:
    """The checksums the merged file must have: the inputs' columns, in order, read apart from
    the merge. An input that records checksums of its own (merged before) must still match them:
    a changed file is refused, not merged and so vouched for; so is one of `proven` that records
    none (rewritten without its footer's key)."""
    merged = TableDigest(schema)
    for source in sources:
        own = recorded(read_footer(fs, source, file_format).metadata)
        if own is None and source in proven:
            raise MergeAltered(f"{source} has no `etl.checksums` in its footer, yet its compaction's record in "
                               f"ZooKeeper says its merge recorded them: it was rewritten since: {_ALTERED_ACTION}")
        alone = TableDigest(schema)
        digest_file(fs, source, [merged] if own is None else [merged, alone], file_format)
        altered = [] if own is None else own.differing(alone.result())
        if altered or (own is not None and own.rows != alone.rows):
            raise MergeAltered(f"{source} does not hold the values recorded when it was written (column "
                               f"{_listed(altered)}): {_ALTERED_ACTION}")
    return merged.result()


def _check_written(fs: WarehouseFileSystem, target: str, schema: pa.Schema, expected: Checksums,
                   file_format: HiveFormat) -> None:
    found = file_checksums(fs, target, schema, file_format)
    altered = expected.differing(found)
    if altered or found.rows != expected.rows:
        fs.delete(target)
        raise MergeAltered(f"merging into {target} changed the values of column {_listed(altered)} "
                           f"({found.rows} rows, its inputs {expected.rows}): {_ALTERED_ACTION}")


def _listed(names: list[str]) -> str:
    more = f" and {len(names) - 1} more" if len(names) > 1 else ""
    return f"'{names[0]}'{more}" if names else "(none: the row count)"


def _merged_schema(fs: WarehouseFileSystem, sources: list[str], file_format: HiveFormat) -> pa.Schema:
    """The newest file's columns first (it has every column added so far), then any older ones.
    Timestamps unmarked: a table's files may mix INT96 and UTC-marked INT64 ones (its
    `[hive] parquet_readers` changed), whose values are UTC alike; the sink marks them again."""
    schemas = []
    for source in reversed(sources):
        with open_data(fs, source, file_format, INT96_UNIT) as data:
            schemas.append(_unmarked(data.schema.remove_metadata()))
    return pa.unify_schemas(schemas)


def _unmarked(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f.with_type(pa.timestamp(f.type.unit)) if pa.types.is_timestamp(f.type) else f
                      for f in schema])


def _conformed(table: pa.Table, schema: pa.Schema) -> pa.Table:
    columns = [table.column(f.name).cast(f.type) if f.name in table.column_names
               else pa.nulls(table.num_rows, f.type) for f in schema]
    return pa.Table.from_arrays(columns, schema=schema)


def _add_counters(counters: dict, footer: Mapping[bytes, bytes]) -> None:
    """Sums the inputs' per-name counters (`etl.ignored_fields`: {"browser": 40}, ...)."""
    for key, raw in footer.items():
        name = key.decode()
        if not name.startswith("etl.") or key in (RANGES_KEY, CHECKSUMS_KEY):
            continue
        found = json.loads(raw)
        if isinstance(found, dict):
            merged = counters.setdefault(name, {})
            for field_name, count in found.items():
                merged[field_name] = merged.get(field_name, 0) + count
