"""Merging committed files into one, a row group at a time (for etl.job.compactor).

The inputs are read row group by row group and appended to one ParquetSink, so memory stays
bounded by a row group or two whatever the partition holds. The merged file's footer lists
every offset range it holds (`etl.ranges`), which is how `etl verify` and `etl recover` see
the ranges of a compacted partition, and sums the inputs' counters (`etl.ignored_fields`, ...).
Files written before a column was added lack it: it is NULL in their rows, as Hive reads them.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from etl.errors import WarehouseError
from etl.sink.fs import WarehouseFileSystem
from etl.sink.parquet import ParquetSink

RANGES_KEY = b"etl.ranges"


@dataclass(frozen=True)
class FileFacts:
    """What a committed file's footer says: rows, and the ranges of a merged file (None for a
    batch's own file, whose name is its one range)."""

    rows: int
    ranges: list[tuple[int, int]] | None


def read_facts(fs: WarehouseFileSystem, path: str) -> FileFacts:
    with fs.open_read(path) as handle:
        metadata = pq.ParquetFile(handle).metadata
    return FileFacts(metadata.num_rows, _ranges(metadata.metadata or {}))


def _ranges(footer: dict) -> list[tuple[int, int]] | None:
    raw = footer.get(RANGES_KEY)
    return None if raw is None else [(int(a), int(b)) for a, b in json.loads(raw)]


def merge_files(fs: WarehouseFileSystem, sources: list[str], target: str, ranges: list[tuple[int, int]],
                row_group_size: int, compression: str) -> int:
    """Write the rows of `sources`, in order, into `target` (a temp name); return its rows.
    The row count is checked against the inputs' footers before the caller publishes it."""
    schema = _merged_schema(fs, sources)
    sink = ParquetSink(fs, target, schema, row_group_size, compression)
    expected, counters = 0, {}
    try:
        for source in sources:
            with fs.open_read(source) as handle:
                parquet = pq.ParquetFile(handle)
                expected += parquet.metadata.num_rows
                _add_counters(counters, parquet.metadata.metadata or {})
                for index in range(parquet.num_row_groups):
                    sink.append(_conformed(parquet.read_row_group(index), schema))
        sink.metadata = {RANGES_KEY: json.dumps([list(r) for r in ranges]).encode(),
                         **{key: json.dumps(value, sort_keys=True).encode() for key, value in counters.items()}}
        sink.close()
    except BaseException:
        sink.abort()
        raise
    if sink.rows_appended != expected:
        fs.delete(target)
        raise WarehouseError(f"merging into {target} wrote {sink.rows_appended} rows, its inputs hold {expected}")
    return expected


def _merged_schema(fs: WarehouseFileSystem, sources: list[str]) -> pa.Schema:
    """The newest file's columns first (it has every column added so far), then any older ones."""
    schemas = []
    for source in reversed(sources):
        with fs.open_read(source) as handle:
            schemas.append(pq.ParquetFile(handle).schema_arrow.remove_metadata())
    return pa.unify_schemas(schemas)


def _conformed(table: pa.Table, schema: pa.Schema) -> pa.Table:
    columns = [table.column(f.name).cast(f.type) if f.name in table.column_names
               else pa.nulls(table.num_rows, f.type) for f in schema]
    return pa.Table.from_arrays(columns, schema=schema)


def _add_counters(counters: dict, footer: dict) -> None:
    """Sums the inputs' per-name counters (`etl.ignored_fields`: {"browser": 40}, ...)."""
    for key, raw in footer.items():
        name = key.decode()
        if not name.startswith("etl.") or key == RANGES_KEY:
            continue
        found = json.loads(raw)
        if isinstance(found, dict):
            merged = counters.setdefault(name, {})
            for field_name, count in found.items():
                merged[field_name] = merged.get(field_name, 0) + count
