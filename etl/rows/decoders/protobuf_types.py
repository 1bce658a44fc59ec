"""Protobuf fields against Hive columns: which field a column can take, and how a column is
read out of a list of parsed messages.

Values are read with `map(operator.attrgetter(...), messages)`, a loop in C, one field at a
time; presence (`HasField`) the same way, for fields that have it. Proto3 scalars without
`optional` have no presence: unset, they read as their default (0, "", false), as protobuf
itself defines; declare them `optional` to get NULL.
"""
from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter, methodcaller

import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf.descriptor import FieldDescriptor

from etl.model.schema import Column
from etl.rows.decoders.base import INTEGER_COLUMNS, Unsupported

F = FieldDescriptor
_SCALARS = {  # protobuf type -> (Arrow read type, Hive columns that hold it, Hive type suggested)
    F.TYPE_BOOL: (pa.bool_(), ("boolean",), "boolean"),
    F.TYPE_INT32: (pa.int32(), (*INTEGER_COLUMNS, "double"), "int"),
    F.TYPE_SINT32: (pa.int32(), (*INTEGER_COLUMNS, "double"), "int"),
    F.TYPE_SFIXED32: (pa.int32(), (*INTEGER_COLUMNS, "double"), "int"),
    F.TYPE_UINT32: (pa.int64(), (*INTEGER_COLUMNS, "double"), "bigint"),
    F.TYPE_FIXED32: (pa.int64(), (*INTEGER_COLUMNS, "double"), "bigint"),
    F.TYPE_INT64: (pa.int64(), (*INTEGER_COLUMNS, "double"), "bigint"),
    F.TYPE_SINT64: (pa.int64(), (*INTEGER_COLUMNS, "double"), "bigint"),
    F.TYPE_SFIXED64: (pa.int64(), (*INTEGER_COLUMNS, "double"), "bigint"),
    F.TYPE_UINT64: (pa.uint64(), INTEGER_COLUMNS, "bigint"),
    F.TYPE_FIXED64: (pa.uint64(), INTEGER_COLUMNS, "bigint"),
    F.TYPE_FLOAT: (pa.float32(), ("float", "double"), "float"),
    F.TYPE_DOUBLE: (pa.float64(), ("double",), "double"),
    F.TYPE_STRING: (pa.string(), ("string", "binary"), "string"),
    F.TYPE_BYTES: (pa.binary(), ("binary",), "binary"),
    F.TYPE_ENUM: (pa.string(), ("string",), "string"),
}
TIMESTAMP = "google.protobuf.Timestamp"
WRAPPERS = {f"google.protobuf.{name}Value": kind for name, kind in [
    ("Bool", F.TYPE_BOOL), ("Int32", F.TYPE_INT32), ("UInt32", F.TYPE_UINT32), ("Int64", F.TYPE_INT64),
    ("UInt64", F.TYPE_UINT64), ("Float", F.TYPE_FLOAT), ("Double", F.TYPE_DOUBLE), ("String", F.TYPE_STRING),
    ("Bytes", F.TYPE_BYTES)]}


@dataclass(frozen=True)
class FieldExtractor:
    """Reads one field of every message into an Arrow array, NULL where the field is unset and
    has presence."""

    field: FieldDescriptor

    def read(self, messages: list) -> tuple[pa.Array, list[tuple[int, str]]]:
        """The values, and (row, reason) of those that cannot be read (an enum number the schema lacks)."""
        field, name = self.field, self.field.name
        message_type = field.message_type.full_name if field.message_type else None
        if message_type == TIMESTAMP:
            seconds = pa.array(map(attrgetter(f"{name}.seconds"), messages), pa.int64())
            nanos = pa.array(map(attrgetter(f"{name}.nanos"), messages), pa.int64())
            values = pc.add(pc.multiply(seconds, 1000), pc.divide(nanos, 1_000_000)).cast(pa.timestamp("ms"))
        elif message_type in WRAPPERS:
            values = pa.array(map(attrgetter(f"{name}.value"), messages), _SCALARS[WRAPPERS[message_type]][0])
        elif field.type == F.TYPE_ENUM:
            return self._enum_names(messages)
        else:
            values = pa.array(map(attrgetter(name), messages), _SCALARS[field.type][0])
        return self._with_presence(values, messages), []

    def _with_presence(self, values: pa.Array, messages: list) -> pa.Array:
        if not self.field.has_presence:
            return values
        present = pa.array(map(methodcaller("HasField", self.field.name), messages), pa.bool_())
        return pc.if_else(present, values, pa.scalar(None, values.type))

    def _enum_names(self, messages: list) -> tuple[pa.Array, list[tuple[int, str]]]:
        numbers = self._with_presence(pa.array(map(attrgetter(self.field.name), messages), pa.int32()), messages)
        known = self.field.enum_type.values
        position = pc.index_in(numbers, value_set=pa.array([v.number for v in known], pa.int32()))
        names = pc.take(pa.array([v.name for v in known], pa.string()), position)
        unknown = pc.and_(pc.is_valid(numbers), pc.is_null(position))
        rows = pc.indices_nonzero(unknown).to_pylist() if pc.any(unknown).as_py() else []
        return names, [(row, f"field '{self.field.name}': {numbers[row].as_py()} is not a value of enum "
                             f"{self.field.enum_type.full_name}") for row in rows]


def extractor(field: FieldDescriptor, column: Column) -> FieldExtractor:
    """How `column` reads `field`, or Unsupported saying why it cannot."""
    if field.is_repeated:
        raise Unsupported("is repeated (or a map): arrays and maps have no column type here")
    message_type = field.message_type.full_name if field.message_type else None
    if message_type == TIMESTAMP:
        holders = ("timestamp",)
    elif message_type in WRAPPERS:
        holders = _SCALARS[WRAPPERS[message_type]][1]
    elif message_type is not None:
        raise Unsupported(f"is a message ({message_type}): nested messages have no column type here; leave the "
                          f"column out of the table, or flatten the field in the producer or a transform")
    else:
        holders = _SCALARS[field.type][1]
    if column.hive_type not in holders:
        raise Unsupported(f"is {_describe(field)}, which a {column.hive_type} column cannot hold "
                          f"(it holds {' or '.join(holders)})")
    return FieldExtractor(field)


def suggested_hive_type(field: FieldDescriptor) -> str | None:
    """The Hive type `etl schema suggest` proposes for a field; None when none fits."""
    if field.is_repeated:
        return None
    message_type = field.message_type.full_name if field.message_type else None
    if message_type == TIMESTAMP:
        return "timestamp"
    if message_type in WRAPPERS:
        return _SCALARS[WRAPPERS[message_type]][2]
    return None if message_type else _SCALARS[field.type][2]


def _describe(field: FieldDescriptor) -> str:
    if field.message_type:
        return field.message_type.full_name
    names = {value: name.removeprefix("TYPE_").lower() for name, value in vars(F).items() if name.startswith("TYPE_")}
    return names.get(field.type, str(field.type))
