"""A rollup's filter (etl.config.rollup_filter) applied to a data file's rows, vectorised with
Arrow (etl.job.rollup_task), and tried on no rows when the job starts (etl.job.assemble).

SQL's three-valued logic, as Hive would apply the same `WHERE` to the table: a comparison with a
NULL is unknown, `not` of unknown is unknown, `and`/`or` are Kleene's, and a row is kept only
where the whole filter is true. A literal is cast to its column's type ('2026-11-29 10:00:00'
for a timestamp column, read as UTC, as the table's timestamps are stored, unless it names its
offset; 500 for a double); one that cannot be is a ValueError naming both.
"""
from __future__ import annotations

import functools

import pyarrow as pa
import pyarrow.compute as pc

from etl.config.rollup_filter import And, Column, Comparison, Expr, In, IsNull, Literal, Not, Operand, Or

_COMPARE = {Comparison.EQ: pc.equal, Comparison.NE: pc.not_equal, Comparison.LT: pc.less,
            Comparison.LE: pc.less_equal, Comparison.GT: pc.greater, Comparison.GE: pc.greater_equal}


def rows_kept(table: pa.Table, expr: Expr) -> pa.BooleanArray:
    """True for each row the filter keeps (false where it is false or unknown)."""
    truth = _truth(table, expr)
    if isinstance(truth, pa.Scalar):  # no column in it: the same for every row
        return pa.array([truth.as_py() is True] * table.num_rows, pa.bool_())
    return pc.fill_null(truth, False).combine_chunks() if table.num_rows else pa.array([], pa.bool_())


def _truth(table: pa.Table, expr: Expr):
    if isinstance(expr, (And, Or)):
        join = pc.and_kleene if isinstance(expr, And) else pc.or_kleene
        return functools.reduce(join, (_truth(table, part) for part in expr.parts))
    if isinstance(expr, Not):
        return pc.invert(_truth(table, expr.part))
    if isinstance(expr, IsNull):
        found = pc.is_null(_value(table, expr.operand, None))
        return pc.invert(found) if expr.negated else found
    if isinstance(expr, In):
        return _in(table, expr)
    left_type = _type_of(table, expr.left) or _type_of(table, expr.right)
    return _COMPARE[expr.op](_value(table, expr.left, left_type), _value(table, expr.right, left_type))


def _in(table: pa.Table, expr: In):
    values = _value(table, expr.operand, None)
    kind = _type_of(table, expr.operand)
    options = pa.array([_scalar(literal, kind).as_py() for literal in expr.values], kind)
    found = pc.is_in(values, value_set=options)
    found = pc.if_else(pc.is_null(values), pa.scalar(None, pa.bool_()), found)  # NULL in (...) is unknown
    return pc.invert(found) if expr.negated else found


def _type_of(table: pa.Table, operand: Operand) -> pa.DataType | None:
    return table.schema.field(operand.name).type if isinstance(operand, Column) else None


def _value(table: pa.Table, operand: Operand, kind: pa.DataType | None):
    if isinstance(operand, Column):
        return table.column(operand.name)
    return _scalar(operand, kind)


def _scalar(literal: Literal, kind: pa.DataType | None) -> pa.Scalar:
    plain = pa.scalar(literal.value)
    if kind is None or plain.type == kind:
        return plain
    try:
        if pa.types.is_timestamp(kind) and kind.tz and pa.types.is_string(plain.type) and \
                not _has_offset(str(literal.value)):
            return pc.cast(pc.cast(plain, pa.timestamp(kind.unit)), kind)  # a wall-clock time in UTC
        return pc.cast(plain, kind)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise ValueError(f"{literal.value!r} cannot be compared with a column of type {kind}: {exc}") from exc


def _has_offset(text: str) -> bool:
    """Whether a timestamp's text names its zone: Z, or +hh:mm / -hh:mm after the time."""
    time = text.partition("T")[2] or text.partition(" ")[2]
    return time.endswith(("Z", "z")) or "+" in time or "-" in time
