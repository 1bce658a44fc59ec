"""The Confluent wire format shared by the avro and protobuf decoders, read a chunk at a time:
a magic byte 0, a 4-byte big-endian schema id, then the payload (for Protobuf, message
indexes come first). The headers of a whole chunk are read with numpy, and the records are
grouped by schema id, so that each group is decoded with one writer schema.

Also what both decoders do with the groups' results: put the rows back in input order, and
turn a column read in the writer's type into the table's type, the values that do not fit
going to the rejected records with the field named.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from etl.model.schema import Column
from etl.rows.decoders.base import EMPTY_MESSAGE, Decoded, converted_where_possible, skipped_reason, wall_clock_to_utc

MAGIC_BYTE = 0
HEADER_BYTES = 5  # the magic byte and the schema id


@dataclass(frozen=True)
class Frames:
    """A chunk's well-framed records by schema id (positions ascending), and the others' reasons."""

    by_schema_id: dict[int, list[int]]
    errors: list[tuple[int, str]]


def split_frames(values) -> Frames:
    """Reads every record's magic byte and schema id at once."""
    array = pa.array(values, pa.binary())
    offsets = np.frombuffer(array.buffers()[1], np.int32, len(array) + 1)
    data = np.frombuffer(array.buffers()[2], np.uint8) if array.buffers()[2] is not None else np.zeros(0, np.uint8)
    starts, lengths = offsets[:-1], np.diff(offsets)
    missing = array.is_null().to_numpy(zero_copy_only=False)
    short = ~missing & (lengths < HEADER_BYTES)
    framed = ~missing & ~short
    magic = np.zeros(len(array), np.uint8)
    magic[framed] = data[starts[framed]]
    wrong_magic = framed & (magic != MAGIC_BYTE)
    good = np.flatnonzero(framed & ~wrong_magic)
    ids = np.zeros(len(good), np.int64)
    for byte in range(1, HEADER_BYTES):
        ids = (ids << 8) | data[starts[good] + byte]
    errors = [(int(i), EMPTY_MESSAGE) for i in np.flatnonzero(missing)]
    errors += [(int(i), f"{lengths[i]} bytes: too short for the Schema Registry framing (a magic byte and a "
                        f"4-byte schema id)") for i in np.flatnonzero(short)]
    errors += [(int(i), f"unknown magic byte 0x{magic[i]:02x}: not written by a Schema Registry serializer "
                        f"(expected 0x00)") for i in np.flatnonzero(wrong_magic)]
    unique, which = np.unique(ids, return_inverse=True)
    groups = {int(schema_id): good[which == k].tolist() for k, schema_id in enumerate(unique)}
    return Frames(groups, sorted(errors))


@dataclass
class GroupResult:
    """One group's decoded rows: `positions` are the input positions of `table`'s rows."""

    table: pa.Table
    positions: list[int]


def merged(output_schema: pa.Schema, results: list[GroupResult], errors: list[tuple[int, str]],
           ignored: dict[str, int]) -> Decoded:
    """The groups' rows in input order, as one Decoded."""
    results = [r for r in results if r.positions]
    if not results:
        return Decoded(output_schema.empty_table(), pa.array([], pa.int64()), sorted(errors), ignored)
    table = pa.concat_tables([r.table for r in results])
    good = pa.array([p for r in results for p in r.positions], pa.int64())
    if len(results) > 1:
        order = pc.sort_indices(good)
        table, good = table.take(order), good.take(order)
    return Decoded(table, good, sorted(errors), ignored)


def to_column(read: pa.Array, column: Column, field_name: str, out_type: pa.DataType, zone: str,
              wall_clock: bool) -> tuple[pa.Array, dict[int, str]]:
    """A field's values, as read, in the column's type; (row, reason) for those that do not fit."""
    bad: dict[int, str] = {}
    array, failed = converted_where_possible(read, lambda values: values.cast(out_type))
    for row in failed:
        bad[row] = f"field '{field_name}': {read[row].as_py()!r} does not fit {column.hive_type}"
    if wall_clock:
        array, skipped = wall_clock_to_utc(array, zone)
        for row in skipped:
            bad.setdefault(row, skipped_reason(f"field '{field_name}':", read[row].as_py(), zone))
    return array, bad


def without_rows(table: pa.Table, positions: list[int], bad: dict[int, str]) -> tuple[pa.Table, list[int], list]:
    """Drops the rows in `bad` (row -> reason): the rows kept, their positions, and the errors."""
    if not bad:
        return table, positions, []
    keep = np.ones(table.num_rows, bool)
    keep[list(bad)] = False
    kept_positions = [p for p, kept in zip(positions, keep) if kept]
    return table.filter(pa.array(keep)), kept_positions, [(positions[row], reason) for row, reason in bad.items()]
