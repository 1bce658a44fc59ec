"""Avro types against Hive columns: which field a column can take, how its values are read into
Arrow, and what Hive type `etl schema suggest` proposes for a field.

The decoder reads timestamps, dates and times as the numbers they are on the wire, and uuids
as their text (those logical types are stripped before decoding, see
`without_time_logical_types`), and converts
them in Arrow, a whole column at a time, so that fastavro builds no datetime per record.
Decimals keep their logical type: fastavro hands over exact Decimals.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Callable

import pyarrow as pa
import pyarrow.compute as pc

from etl.model.schema import Column
from etl.rows.decoders.base import INTEGER_COLUMNS, Unsupported

# Logical types read as their underlying number; time-* has no Hive type and stays a number.
TIME_LOGICAL_TYPES = ("timestamp-millis", "timestamp-micros", "timestamp-nanos", "local-timestamp-millis",
                      "local-timestamp-micros", "local-timestamp-nanos", "date", "time-millis", "time-micros")
# Read as the underlying type too: fastavro would hand over Python objects Arrow does not take.
STRIPPED_LOGICAL_TYPES = (*TIME_LOGICAL_TYPES, "uuid")
_PER_MILLISECOND = {"millis": 1, "micros": 1_000, "nanos": 1_000_000}
_SIMPLE = {  # Avro type -> (Arrow read type, Hive columns that hold it, Hive type suggested)
    "boolean": (pa.bool_(), ("boolean",), "boolean"),
    "int": (pa.int32(), (*INTEGER_COLUMNS, "float", "double"), "int"),
    "long": (pa.int64(), (*INTEGER_COLUMNS, "float", "double"), "bigint"),
    "float": (pa.float32(), ("float", "double"), "float"),
    "double": (pa.float64(), ("double",), "double"),
    "string": (pa.string(), ("string", "binary"), "string"),
    "enum": (pa.string(), ("string",), "string"),
    "bytes": (pa.binary(), ("binary",), "binary"),
    "fixed": (pa.binary(), ("binary",), "binary"),
}


@dataclass(frozen=True)
class FieldReader:
    """How one field's values become one column: read into `read_type` by Arrow, then `finish`
    (a vectorised conversion; the zone is [hive] partition_timezone, for local timestamps)."""

    read_type: pa.DataType
    finish: Callable[[pa.Array, str], pa.Array]
    wall_clock: bool = False  # a local-timestamp: wall-clock time in the zone, stored as UTC


def resolve(field_type, named: dict):
    """The field's type with a named reference replaced by its definition, and a nullable union
    ["null", T] by T; any other union is refused."""
    if isinstance(field_type, str) and field_type in named:
        return resolve(named[field_type], named)
    if isinstance(field_type, list):
        branches = [branch for branch in field_type if branch != "null"]
        if len(branches) != 1:
            raise Unsupported(f"is a union of {', '.join(map(_describe, branches))}: only a union of null and "
                              f"one type maps to a column")
        return resolve(branches[0], named)
    return field_type


def field_reader(field_type, named: dict, column: Column) -> FieldReader:
    """How `column` reads a field of `field_type`, or Unsupported saying why it cannot."""
    resolved = resolve(field_type, named)
    base, logical = _base_and_logical(resolved)
    if logical == "decimal":
        return _decimal_reader(resolved, column)
    if logical in TIME_LOGICAL_TYPES and not logical.startswith("time-"):
        return _time_reader(logical, column)
    if base == "null":
        return FieldReader(pa.null(), lambda values, zone: values)
    if base not in _SIMPLE:
        raise Unsupported(f"is an Avro {base}: nested records, arrays and maps have no column type here; leave "
                          f"the column out of the table, or flatten the field in the producer or a transform")
    read_type, holders, _ = _SIMPLE[base]
    if column.hive_type not in holders:
        raise Unsupported(f"is Avro {_describe(resolved)}, which a {column.hive_type} column cannot hold "
                          f"(it holds {' or '.join(holders)})")
    return FieldReader(read_type, lambda values, zone: values)


def suggested_hive_type(field_type, named: dict) -> str | None:
    """The Hive type `etl schema suggest` proposes for a field; None when none fits."""
    try:
        resolved = resolve(field_type, named)
    except Unsupported:
        return None
    base, logical = _base_and_logical(resolved)
    if logical == "decimal":
        return f"decimal({resolved['precision']},{resolved.get('scale', 0)})"
    if logical == "date":
        return "date"
    if logical in TIME_LOGICAL_TYPES and "timestamp" in logical:
        return "timestamp"
    return _SIMPLE[base][2] if base in _SIMPLE else None


def without_time_logical_types(schema):
    """A copy of a writer schema (its JSON) that decodes the same bytes, but hands over the
    numbers of timestamps, dates and times instead of Python datetimes."""
    def strip(node):
        if isinstance(node, dict):
            if node.get("logicalType") in STRIPPED_LOGICAL_TYPES:
                return node["type"]
            return {key: strip(value) for key, value in node.items()}
        if isinstance(node, list):
            return [strip(item) for item in node]
        return node
    return strip(copy.deepcopy(schema))


def _base_and_logical(resolved) -> tuple[str, str | None]:
    if isinstance(resolved, dict):
        base = resolved.get("type")
        return (base if isinstance(base, str) else "record"), resolved.get("logicalType")
    return resolved, None


def _describe(avro_type) -> str:
    base, logical = _base_and_logical(avro_type)
    return f"{base} ({logical})" if logical else str(base)


def _decimal_reader(resolved: dict, column: Column) -> FieldReader:
    if not column.hive_type.startswith("decimal"):
        raise Unsupported(f"is Avro decimal({resolved['precision']},{resolved.get('scale', 0)}), which a "
                          f"{column.hive_type} column cannot hold (declare it decimal)")
    precision, scale = int(resolved["precision"]), int(resolved.get("scale", 0))
    if precision > 38:
        raise Unsupported(f"is Avro decimal({precision},{scale}): Hive decimals hold at most 38 digits")
    return FieldReader(pa.decimal128(precision, scale), lambda values, zone: values)


def _time_reader(logical: str, column: Column) -> FieldReader:
    if logical == "date":
        if column.hive_type != "date":
            raise Unsupported(f"is Avro int (date), which a {column.hive_type} column cannot hold (declare it date)")
        return FieldReader(pa.int32(), lambda values, zone: values.cast(pa.date32()))
    if column.hive_type != "timestamp":
        raise Unsupported(f"is Avro long ({logical}), which a {column.hive_type} column cannot hold "
                          f"(declare it timestamp)")
    per_ms = _PER_MILLISECOND[logical.rsplit("-", 1)[1]]
    return FieldReader(pa.int64(), lambda values, zone: _millis(values, per_ms).cast(pa.timestamp("ms")),
                       wall_clock=logical.startswith("local-"))


def _millis(values: pa.Array, per_ms: int) -> pa.Array:
    """Milliseconds, floored (not truncated toward zero: a time before 1970 must not round up)."""
    if per_ms == 1:
        return values
    quotient = pc.divide(values, per_ms)  # integer division truncates toward zero
    inexact_below_zero = pc.and_(pc.less(values, 0), pc.not_equal(pc.multiply(quotient, per_ms), values))
    return pc.if_else(inexact_below_zero, pc.subtract(quotient, 1), quotient)
