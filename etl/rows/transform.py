"""Custom transforms: `[job] transform = module:function`, applied in each task to each chunk.

The contract (docs/enrichment.md, "Custom transforms"):
  - called as function(table) or function(table, lookups), with at least one row;
  - `table` has the file's schema: every DDL column in DDL order (decoded, enriched, lineage,
    key; a column nobody filled yet is NULL), one row per decoded record, in offset order;
  - `lookups` maps each [dimension] name (with routes, each the route lists) to its Arrow table;
  - it returns a pyarrow.Table with every DDL column (in any order; types are cast to the
    DDL's without loss, and a double beyond a float column's range fails like any lossy cast)
    and optionally a string column `_reject_reason`: a row where it is not NULL goes to
    <table>_rejected with its raw message and that reason;
  - it returns exactly the rows it received: the same kafka_offset values, each once (in any
    order), and the lineage and key columns unchanged. A transform that drops, duplicates or
    invents a row fails the batch (TransformError): a record is never lost silently;
  - it is deterministic: a replay after a crash must produce the same rows.
A row holding a value Hive or Spark cannot read back (etl.rows.hive_values: a timestamp or date out
of range, a decimal beyond its precision), wherever it came from, goes to <table>_rejected with
the column and value named: it is checked just before the rows are written (etl.rows.pipeline).
A transform that raises fails its task: the task's temp files are deleted, nothing of its
range is published, and the batch stays PLANNED for the next run.
"""
from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from typing import Callable, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from etl.errors import ConfigError, TransformError
from etl.rows.hive_values import float_overflow, too_large_for_float

REJECT_COLUMN = "_reject_reason"
_SHOWN = 5  # offsets named in an error message


def load_transform(spec: str) -> tuple[Callable, int]:
    """The function `spec` names and how many arguments it takes (1 or 2), or ConfigError."""
    module_name, _, name = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise ConfigError(f"[job] transform: cannot import module {module_name!r} of {spec!r}: "
                          f"{type(exc).__name__}: {exc}; install it where the driver and the executors run") from exc
    function = getattr(module, name, None)
    if not callable(function):
        raise ConfigError(f"[job] transform: {module_name} has no function {name!r}; name a callable as "
                          f"module:function")
    return function, _arity(spec, function)


def _arity(spec: str, function: Callable) -> int:
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return 1
    for arity in (2, 1):
        try:
            signature.bind(*range(arity))
            return arity
        except TypeError:
            continue
    raise ConfigError(f"[job] transform: {spec} must take (table) or (table, lookups); its signature is {signature}")


@dataclass(frozen=True)
class Transformed:
    kept: pa.Table  # the file schema, offset order, rejected rows removed
    rejected: list[tuple[int, str]]  # (position in the input table, reason)


class TransformStep:
    """One task's transform: calls it and holds it to its contract."""

    def __init__(self, spec: str, file_schema: pa.Schema, owned: tuple[str, ...], lookups: Mapping[str, pa.Table]):
        self.spec, self.file_schema, self.owned, self.lookups = spec, file_schema, owned, lookups
        try:
            self.function, self.arity = load_transform(spec)
        except ConfigError as exc:
            raise TransformError(f"on this executor: {exc}") from exc

    def apply(self, rows: pa.Table, where: str) -> Transformed:
        out = self._call(rows, where)
        columns, reasons = self._conformed(out, where)
        table = pa.Table.from_arrays(columns, schema=self.file_schema)
        if reasons is not None:
            table = table.append_column(REJECT_COLUMN, reasons)
        table = self._aligned(table, rows, where)
        return self._split(table)

    def _fail(self, where: str, what: str) -> TransformError:
        return TransformError(f"transform {self.spec} {what} ({where}). Nothing of this range was published; the "
                              f"batch stays PLANNED. Fix the transform and run again: the batch resumes with "
                              f"exactly its recorded ranges")

    def _call(self, rows: pa.Table, where: str) -> pa.Table:
        try:
            out = self.function(rows, self.lookups) if self.arity == 2 else self.function(rows)
        except Exception as exc:
            raise self._fail(where, f"raised {type(exc).__name__}: {exc}") from exc
        if isinstance(out, pa.RecordBatch):
            out = pa.Table.from_batches([out])
        if not isinstance(out, pa.Table):
            raise self._fail(where, f"returned a {type(out).__name__}, not a pyarrow.Table")
        return out

    def _conformed(self, out: pa.Table, where: str) -> tuple[list[pa.ChunkedArray], pa.ChunkedArray | None]:
        names = out.column_names
        unknown = [n for n in names if n != REJECT_COLUMN and self.file_schema.get_field_index(n) < 0]
        missing = [n for n in self.file_schema.names if n not in names]
        if len(set(names)) != len(names) or unknown or missing:
            raise self._fail(where, f"returned columns {names}: "
                                    f"{'unknown ' + str(unknown) if unknown else ''}"
                                    f"{' missing ' + str(missing) if missing else ''}"
                                    f"{' a duplicate name' if len(set(names)) != len(names) else ''}; return every "
                                    f"column of the table it received, and only those (plus {REJECT_COLUMN})")
        columns = [self._cast(out.column(field.name), field, where) for field in self.file_schema]
        reasons = None
        if REJECT_COLUMN in names:
            reasons = self._cast(out.column(REJECT_COLUMN), pa.field(REJECT_COLUMN, pa.string()), where)
        return columns, reasons

    def _cast(self, values: pa.ChunkedArray, field: pa.Field, where: str) -> pa.ChunkedArray:
        try:
            cast = values.cast(field.type, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise self._fail(where, f"returned column {field.name!r} as {values.type}, which does not fit "
                                    f"{field.type}: {exc}") from exc
        # A safe cast still turns a double beyond float's range into infinity: as lossy as any other.
        overflow = float_overflow(values, cast) if field.type == pa.float32() and values.type != cast.type else []
        if overflow:
            raise self._fail(where, f"returned column {field.name!r} as {values.type}, which does not fit "
                                    f"{field.type}: {too_large_for_float(repr(values[overflow[0]].as_py()))}")
        return cast

    def _aligned(self, out: pa.Table, rows: pa.Table, where: str) -> pa.Table:
        """`out` in the input's offset order; refuses lost, duplicated or invented rows and
        changed lineage."""
        offsets = out.column("kafka_offset")
        if out.num_rows > 1 and not pc.all(pc.greater(offsets[1:], offsets[:-1])).as_py():
            out = out.take(pc.sort_indices(offsets))
        if not out.column("kafka_offset").equals(rows.column("kafka_offset")):
            raise self._fail(where, self._row_mismatch(rows.column("kafka_offset"), out.column("kafka_offset")))
        for name in self.owned:
            if not out.column(name).equals(rows.column(name)):
                raise self._fail(where, f"changed column {name!r}, which the ETL fills (lineage or key); leave it "
                                        f"as it was")
        return out

    def _row_mismatch(self, given: pa.ChunkedArray, returned: pa.ChunkedArray) -> str:
        lost = given.filter(pc.invert(pc.is_in(given, value_set=returned.combine_chunks())))
        invented = returned.filter(pc.invert(pc.is_in(returned, value_set=given.combine_chunks())))
        duplicated = len(returned) - pc.count_distinct(returned).as_py()
        parts = [f"{label} {arr.slice(0, _SHOWN).to_pylist()}{' ...' if len(arr) > _SHOWN else ''}"
                 for label, arr in (("lost offsets", lost), ("invented offsets", invented)) if len(arr)]
        if duplicated:
            parts.append(f"{duplicated} duplicated rows")
        return (f"returned {len(returned)} rows for {len(given)} records: {', '.join(parts)}. A transform must "
                f"return every row it receives, once: to keep a record out of the table, set its "
                f"{REJECT_COLUMN} (it then goes to the rejected table), never drop it")

    def _split(self, table: pa.Table) -> Transformed:
        if REJECT_COLUMN not in table.column_names:
            return Transformed(table, [])
        reasons = table.column(REJECT_COLUMN)
        table = table.drop_columns([REJECT_COLUMN])
        rejected_mask = pc.is_valid(reasons)
        if not pc.any(rejected_mask).as_py():
            return Transformed(table, [])
        positions = pc.indices_nonzero(rejected_mask).to_pylist()
        return Transformed(table.filter(pc.invert(rejected_mask)),
                           list(zip(positions, reasons.filter(rejected_mask).to_pylist())))
