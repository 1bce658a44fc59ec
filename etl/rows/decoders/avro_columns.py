"""Flat Avro records read a field at a time across a whole group, with numpy.

fastavro's compiled reader costs about 4.5 µs a record, most of it in one Python `read` call
per byte of a varint and per value. A record whose fields are all primitive (null, boolean,
int, long, float, double, string, bytes, enum, fixed, a decimal on bytes or fixed, or a union
of those) has no nesting, so every record of a group can be read in lock-step: field by field,
one numpy step over all the records' cursors. Anything unusual in a record (its bytes end too
early or too late, a varint of ten bytes or more, a negative length, a union branch or enum
symbol out of range, a string that is not UTF-8, an int beyond 32 bits, a decimal beyond its
precision) marks that record for fastavro, which decodes it or says why not exactly as it did
before: this reader only ever agrees with fastavro or defers.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from etl.rows.decoders.base import invalid_utf8_positions
from etl.rows.hive_values import largest_decimal

_FIXED_WIDTH = {"boolean": 1, "float": 4, "double": 8}
_PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "string", "bytes", "enum", "fixed")
_MAX_VARINT_BYTES = 9  # a longer one may overflow 64 bits: fastavro's arithmetic decides it
_INT32 = (-(2**31), 2**31 - 1)


@dataclass(frozen=True)
class WireType:
    """One field's type as it is on the wire: a primitive, or a union of primitives."""

    kind: str  # one of _PRIMITIVES, "decimal" or "union"
    symbols: tuple[str, ...] = ()  # enum
    size: int = 0  # fixed, and a decimal on fixed (0: a decimal on bytes)
    branches: tuple[WireType, ...] = ()  # union


def wire_types(decode_schema: dict, named: dict) -> dict[str, WireType] | None:
    """Each top-level field's wire type, or None when a field is not flat (a record, an array,
    a map, a decimal logical type) and the records need fastavro."""
    found = {}
    for field in decode_schema["fields"]:
        wire = _wire_type(field["type"], named)
        if wire is None:
            return None
        found[field["name"]] = wire
    return found


def _wire_type(avro_type, named: dict, in_union: bool = False) -> WireType | None:
    if isinstance(avro_type, str) and avro_type in named:
        return _wire_type(named[avro_type], named, in_union)
    if isinstance(avro_type, list):
        branches = [_wire_type(branch, named, True) for branch in avro_type]
        return None if in_union or None in branches else WireType("union", branches=tuple(branches))  # type: ignore
    if isinstance(avro_type, dict):
        if avro_type.get("logicalType") == "decimal" and avro_type.get("type") in ("bytes", "fixed"):
            return WireType("decimal", size=int(avro_type.get("size", 0)))
        if avro_type.get("logicalType", "uuid") != "uuid" or avro_type.get("type") == "record":
            return None
        if avro_type.get("type") == "enum":
            return WireType("enum", symbols=tuple(avro_type["symbols"]))
        if avro_type.get("type") == "fixed":
            return WireType("fixed", size=int(avro_type["size"]))
        return _wire_type(avro_type.get("type"), named, in_union)
    return WireType(avro_type) if avro_type in _PRIMITIVES and avro_type not in ("enum", "fixed") else None


class _Cursors:
    """Every record's read position in one buffer; a record that goes wrong is marked, and its
    cursor stops mattering."""

    def __init__(self, data: np.ndarray, starts: np.ndarray, ends: np.ndarray):
        self.data = np.concatenate([data, np.zeros(16, np.uint8)])  # reads past the end stay in bounds
        self.pos, self.end = starts.astype(np.int64), ends.astype(np.int64)
        self.odd = np.zeros(len(starts), bool)

    def varints(self, rows: np.ndarray) -> np.ndarray:
        """Zigzag varints at the rows' cursors, as int64; the cursors move past them."""
        value = np.zeros(len(rows), np.uint64)
        going = np.arange(len(rows))
        for shift in range(0, 7 * _MAX_VARINT_BYTES, 7):
            byte = self.data[self.pos[rows[going]]]
            value[going] |= (byte & 0x7F).astype(np.uint64) << np.uint64(shift)
            self.pos[rows[going]] += 1
            going = going[byte >= 0x80]
            if not len(going):
                break
        self.odd[rows[going]] = True
        self._check(rows)
        return ((value >> np.uint64(1)).astype(np.int64)) ^ -((value & np.uint64(1)).astype(np.int64))

    def skip(self, rows: np.ndarray, widths: np.ndarray | int) -> np.ndarray:
        """The rows' cursors, then moved `widths` bytes on: where each value starts."""
        starts = self.pos[rows].copy()
        self.pos[rows] += widths
        self._check(rows)
        return starts

    def gather(self, starts: np.ndarray, width: int) -> np.ndarray:
        """`width` bytes from each start, one row of bytes a value."""
        return self.data[starts[:, None] + np.arange(width)]

    def _check(self, rows: np.ndarray) -> None:
        over = rows[self.pos[rows] > self.end[rows]]
        self.odd[over] = True
        self.pos[over] = self.end[over]  # its later reads stay inside the buffer


class _Column:
    """One field's values for every record, filled branch by branch; unset values are NULL."""

    def __init__(self, count: int):
        self.valid = np.zeros(count, bool)
        self.numbers: np.ndarray | None = None
        self.starts = np.zeros(count, np.int64)
        self.lengths = np.zeros(count, np.int64)
        self.symbols: tuple[str, ...] = ()
        self.text = np.zeros(count, bool)  # values that must be UTF-8: fastavro decodes them as str
        self.checked: pa.BinaryArray | None = None  # the values, once found all UTF-8 (a string field's)


def read_flat(values: pa.BinaryArray, skip: int, wire: dict[str, WireType], read_schema: pa.Schema) \
        -> tuple[pa.Table, np.ndarray]:
    """The records of `values` (each after `skip` header bytes) as a table in `read_schema`, and
    a mask of the records it could not read for sure, whose rows hold placeholders."""
    offsets = np.frombuffer(values.buffers()[1], np.int32, len(values) + 1, values.offset * 4).astype(np.int64)
    data = np.frombuffer(values.buffers()[2], np.uint8) if values.buffers()[2] is not None else np.zeros(0, np.uint8)
    cursors = _Cursors(data, offsets[:-1] + skip, offsets[1:])
    everyone = np.arange(len(values))
    columns = {}
    for name, wire_type in wire.items():
        column = _Column(len(values))
        _read(cursors, everyone, wire_type, column)
        columns[name] = column
    cursors.odd |= cursors.pos != cursors.end  # bytes left over after the record
    for column in columns.values():
        if column.text.any():
            _check_utf8(column, cursors)
    arrays = [_arrow(columns[field.name], field.type, cursors) for field in read_schema]
    return pa.Table.from_arrays(arrays, schema=read_schema), cursors.odd


def _read(cursors: _Cursors, rows: np.ndarray, wire: WireType, column: _Column) -> None:
    kind = wire.kind
    if kind == "union":
        index = cursors.varints(rows)
        cursors.odd[rows[(index < 0) | (index >= len(wire.branches))]] = True
        for number, branch in enumerate(wire.branches):
            _read(cursors, rows[index == number], branch, column)
        return
    if kind == "null":
        return
    column.valid[rows] = True
    if kind in ("int", "long", "enum"):
        numbers = cursors.varints(rows)
        if kind == "enum":
            cursors.odd[rows[(numbers < 0) | (numbers >= len(wire.symbols))]] = True
            column.symbols = wire.symbols
        if kind == "int":
            cursors.odd[rows[(numbers < _INT32[0]) | (numbers > _INT32[1])]] = True
        _put(column, rows, numbers)
    elif kind in _FIXED_WIDTH:
        width = _FIXED_WIDTH[kind]
        raw = cursors.gather(cursors.skip(rows, width), width)
        numbers = raw[:, 0] != 0 if kind == "boolean" else raw.view("<f4" if width == 4 else "<f8")[:, 0]
        _put(column, rows, numbers)
    else:  # string, bytes, fixed, decimal
        fixed = kind == "fixed" or kind == "decimal" and wire.size
        lengths = np.full(len(rows), wire.size, np.int64) if fixed else cursors.varints(rows)
        cursors.odd[rows[lengths < 0]] = True
        lengths = np.maximum(lengths, 0)
        column.starts[rows], column.lengths[rows] = cursors.skip(rows, lengths), lengths
        column.text[rows] = kind == "string"


def _put(column: _Column, rows: np.ndarray, numbers: np.ndarray) -> None:
    if column.numbers is None:
        column.numbers = np.zeros(len(column.valid), numbers.dtype)
    column.numbers[rows] = numbers


def _arrow(column: _Column, read_type: pa.DataType, cursors: _Cursors) -> pa.Array:
    """The column as `read_type` (what the field's reader asks for); odd rows hold anything."""
    mask = ~column.valid
    if pa.types.is_null(read_type):
        return pa.nulls(len(mask))
    if column.numbers is not None and column.symbols:
        return pa.array(column.symbols, pa.string()).take(pa.array(column.numbers.clip(0, len(column.symbols) - 1),
                                                                   mask=mask | cursors.odd))
    if column.numbers is not None:
        numbers = column.numbers.clip(*_INT32) if read_type == pa.int32() else column.numbers  # odd rows' too
        return pa.array(numbers, read_type, mask=mask)
    if pa.types.is_decimal(read_type):
        return _decimal(column, read_type, cursors, mask)
    return _binary(column, read_type, cursors, mask)


def _decimal(column: _Column, read_type: pa.Decimal128Type, cursors: _Cursors, mask: np.ndarray) -> pa.Array:
    """Big-endian two's-complement unscaled values as decimal128: each right-aligned in 16
    bytes, sign-extended, byte order reversed. One longer than 16 bytes, or with more digits
    than the precision (fastavro rounds those to it), is left to fastavro."""
    lengths = np.where(mask | cursors.odd, 0, column.lengths)
    cursors.odd[lengths > 16] = True
    lengths = np.where(lengths > 16, 0, lengths)
    width = np.arange(16)
    pad = 16 - lengths
    inside = width[None, :] >= pad[:, None]
    sources = np.where(inside, column.starts[:, None] + width[None, :] - pad[:, None], 0)
    negative = (lengths > 0) & (cursors.data[column.starts] >= 0x80)
    big_endian = np.where(inside, cursors.data[sources], np.where(negative, 0xFF, 0)[:, None]).astype(np.uint8)
    little = np.ascontiguousarray(big_endian[:, ::-1])
    validity = pa.array(~mask).buffers()[1]
    wide = pa.Array.from_buffers(pa.decimal128(38, read_type.scale), len(mask), [validity, pa.py_buffer(little)])
    largest = largest_decimal(read_type)
    beyond = pc.or_(pc.greater(wide, pa.scalar(largest, wide.type)),
                    pc.less(wide, pa.scalar(largest.copy_negate(), wide.type)))
    cursors.odd |= np.asarray(beyond.fill_null(False))
    little[cursors.odd] = 0  # in the buffer the arrays share: odd rows become 0, which fits
    return pa.Array.from_buffers(read_type, len(mask), [validity, pa.py_buffer(little)])


def _binary(column: _Column, read_type: pa.DataType, cursors: _Cursors, mask: np.ndarray) -> pa.Array:
    """Strings and bytes gathered into one contiguous buffer (odd rows as empty values); a
    string field's values are gathered once, for their UTF-8 check, and reused here."""
    if column.checked is not None:
        return column.checked.cast(read_type)
    lengths = np.where(mask | cursors.odd, 0, column.lengths)
    ends = np.cumsum(lengths)
    total = int(ends[-1]) if len(ends) else 0
    sources = np.repeat(column.starts - (ends - lengths), lengths) + np.arange(total)
    offsets = np.concatenate([[0], ends]).astype(np.int32)
    binary = pa.Array.from_buffers(pa.binary(), len(lengths), [pa.array(~mask).buffers()[1], pa.py_buffer(offsets),
                                                               pa.py_buffer(cursors.data[sources])])
    return binary if read_type == pa.binary() else binary.cast(read_type)


def _check_utf8(column: _Column, cursors: _Cursors) -> None:
    """Marks the records whose string values are not UTF-8 (fastavro's str() refuses them). When
    none is and every value is a string (no bytes branch), the gathered values are kept: the
    records marked odd later are dropped from the table, and their bytes are UTF-8 too."""
    values = _binary(column, pa.binary(), cursors, ~column.text)
    broken = invalid_utf8_positions(values)
    cursors.odd[broken] = True
    if not broken and np.array_equal(column.text, column.valid):
        column.checked = values
