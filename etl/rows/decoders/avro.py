"""The avro decoder: Avro records in the Confluent framing, each decoded with the writer schema
its id names (fetched from the Schema Registry), or plain Avro records all written with the
fixed [job] avro_schema.

A flat writer schema (primitive fields and unions of them) is read a field at a time across
all its records with numpy (etl.rows.decoders.avro_columns); a nested one, and any record that
reader defers, costs one call into fastavro's compiled reader. Everything else is done a chunk
at a time: the framing is read with numpy (etl.rows.decoders.framing), and each column reaches
its table type in a few vectorised kernels. A record that does not decode, or does not use up
exactly its own bytes, is rejected with the reason; so is a value its column cannot hold.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from io import BytesIO
from typing import Sequence

import fastavro
import numpy as np
import pyarrow as pa

from etl.model.schema import Column, TableSchema
from etl.rows.decoders.avro_columns import WireType, read_flat, wire_types
from etl.rows.decoders.avro_types import FieldReader, field_reader, suggested_hive_type, without_time_logical_types
from etl.rows.decoders.base import EMPTY_MESSAGE, Decoded, Decoder, Unsupported
from etl.rows.decoders.framing import HEADER_BYTES, GroupResult, merged, split_frames, to_column, without_rows
from etl.rows.decoders.writer_schemas import AVRO, WriterSchema, WriterSchemas, unknown_schema_id

# What fastavro raises on bytes that are not a record of the schema (found by feeding it
# random and truncated payloads; tests/unit/test_avro_decoder.py keeps that up).
DECODE_ERRORS = (EOFError, ValueError, IndexError, KeyError, OverflowError, UnicodeDecodeError, MemoryError,
                 TypeError, StopIteration)
FIXED_SCHEMA = -1  # the group key of records read with [job] avro_schema
_AVRO_NAMES = {pa.int32(): "int", pa.int64(): "long", pa.float32(): "float", pa.float64(): "double"}


class AvroDecoder(Decoder):
    """Avro records; their fields fill the data columns of the same name (case-insensitive).

    A missing field is NULL and a field the table lacks is ignored (and counted). Which
    fields a writer schema maps to which columns is worked out once per schema id.
    """

    def __init__(self, schema: TableSchema, zone: str = "UTC", writer_schemas: WriterSchemas | None = None,
                 fixed_schema: str | None = None):
        super().__init__(schema, zone)
        if (writer_schemas is None) == (fixed_schema is None):
            raise ValueError("an AvroDecoder reads either a Schema Registry or one fixed schema")
        self.writer_schemas, self.fixed_schema = writer_schemas, fixed_schema
        self._plans: dict[int, AvroPlan | str] = {}

    def __getstate__(self):
        return {**self.__dict__, "_plans": {}}  # plans hold parsed schemas: built again in each task

    def decode(self, values: Sequence[bytes | None]) -> Decoded:
        binary = pa.array(values, pa.binary())  # one buffer: the framing and the flat reader read it
        if self.fixed_schema is not None:
            missing = binary.is_null().to_numpy(zero_copy_only=False)
            groups = {FIXED_SCHEMA: np.flatnonzero(~missing).tolist()}
            errors, skip = [(int(i), EMPTY_MESSAGE) for i in np.flatnonzero(missing)], 0
        else:
            frames = split_frames(binary)
            groups, errors, skip = frames.by_schema_id, list(frames.errors), HEADER_BYTES
        results, ignored = [], {}
        for schema_id, positions in groups.items():
            plan = self.plan(schema_id)
            if isinstance(plan, str):
                errors += [(position, plan) for position in positions]
                continue
            group = binary if len(positions) == len(binary) else binary.take(pa.array(positions, pa.int64()))
            result, group_errors = plan.decode(values, group, positions, skip, self.zone)
            results.append(result)
            errors += group_errors
            for name in plan.ignored:
                ignored[name] = ignored.get(name, 0) + len(positions)
        return merged(self.output_schema, results, errors, ignored)

    def plan(self, schema_id: int) -> AvroPlan | str:
        """How records of this writer schema become rows, or why none of them can."""
        if schema_id in self._plans:
            return self._plans[schema_id]
        if schema_id == FIXED_SCHEMA:
            writer, where = WriterSchema(None, AVRO, self.fixed_schema), "avro_schema"
        else:
            writer, where = self.writer_schemas.by_id(schema_id), f"schema id {schema_id}"
            if writer is None:  # not kept: the registry may learn it (restored from a backup, say)
                return unknown_schema_id(schema_id, self.writer_schemas)
        self._plans[schema_id] = self._plan_of(writer, where)
        return self._plans[schema_id]

    def check(self, writer: WriterSchema, where: str) -> None:
        """Raises Unsupported when a column cannot hold its field in this writer schema."""
        AvroPlan.of(json.loads(writer.text), self._referenced(writer), self.schema.data_columns,
                    self.output_schema, where)

    def fields_of(self, writer: WriterSchema) -> list[tuple[str, str | None]]:
        """The writer schema's top-level fields, each with the Hive type that would hold it (None: none)."""
        named = {}
        for schema in self._referenced(writer):
            fastavro.parse_schema(schema, named_schemas=named)
        parsed = fastavro.parse_schema(json.loads(writer.text), named_schemas=named)
        return [(field["name"], suggested_hive_type(field["type"], named)) for field in parsed.get("fields", ())]

    def _plan_of(self, writer: WriterSchema, where: str) -> AvroPlan | str:
        if writer.schema_type != AVRO:
            return f"{where} is a {writer.schema_type} schema, not Avro; set [job] decoder"
        try:
            return AvroPlan.of(json.loads(writer.text), self._referenced(writer), self.schema.data_columns,
                               self.output_schema, where)
        except Unsupported as exc:
            return str(exc)

    def _referenced(self, writer: WriterSchema) -> list:
        """The JSON of the schemas `writer` refers to (named types registered under other subjects),
        those they refer to first."""
        found = []
        for reference in writer.references:
            schema = self.writer_schemas.version(reference.subject, reference.version)
            if schema is None:
                raise Unsupported(f"{reference.name} refers to {reference.subject} version {reference.version}, "
                                  f"which the Schema Registry does not have")
            found += self._referenced(schema) + [json.loads(schema.text)]
        return found


@dataclass(frozen=True)
class ColumnPlan:
    column: Column
    out_type: pa.DataType
    field_name: str | None  # None: the writer schema has no such field, the column is NULL
    reader: FieldReader | None


@dataclass(frozen=True)
class AvroPlan:
    """One writer schema against the table: the schema fastavro decodes with, the columns."""

    decode_schema: dict
    read_schema: pa.Schema  # the mapped fields, in the Arrow types they are read into
    columns: tuple[ColumnPlan, ...]
    ignored: tuple[str, ...]  # the writer's fields the table lacks
    where: str
    wire: dict[str, WireType] | None  # every field's wire type when the schema is flat, else None

    @classmethod
    def of(cls, writer: dict, referenced: list, data_columns, output_schema: pa.Schema, where: str) -> AvroPlan:
        named, decode_named = {}, {}
        for schema in referenced:
            fastavro.parse_schema(schema, named_schemas=named)
            fastavro.parse_schema(without_time_logical_types(schema), named_schemas=decode_named)
        parsed = fastavro.parse_schema(writer, named_schemas=named)
        if parsed.get("type") != "record":
            raise Unsupported(f"{where}: the writer schema is an Avro {parsed.get('type')}, not a record")
        fields = {field["name"]: field["type"] for field in parsed["fields"]}
        by_lower = {name.lower(): name for name in fields}
        columns = tuple(cls._column(column, out.type, by_lower.get(column.name.lower()), fields, named, where)
                        for column, out in zip(data_columns, output_schema))
        mapped = {c.field_name for c in columns}
        decode_schema = fastavro.parse_schema(without_time_logical_types(writer), named_schemas=decode_named)
        read_types = [(c.field_name, c.reader.read_type) for c in columns if c.reader]
        return cls(decode_schema=decode_schema, read_schema=pa.schema(read_types), columns=columns,
                   ignored=tuple(name for name in fields if name not in mapped), where=where,
                   wire=wire_types(decode_schema, decode_named))

    @staticmethod
    def _column(column: Column, out_type, name: str | None, fields: dict, named: dict, where: str) -> ColumnPlan:
        if name is None:
            return ColumnPlan(column, out_type, None, None)
        try:
            return ColumnPlan(column, out_type, name, field_reader(fields[name], named, column))
        except Unsupported as exc:
            raise Unsupported(f"{where}: field '{name}' {exc}; column {column.name} is {column.hive_type}") from exc

    def decode(self, values, group: pa.BinaryArray, positions: list[int], skip: int, zone: str) \
            -> tuple[GroupResult, list]:
        """The records at `positions` of `values` (`group`: those values, as one array)."""
        read, kept, errors = self._read(values, group, positions, skip)
        table, bad = self._table(read, zone)
        table, kept, bad_errors = without_rows(table, kept, bad)
        return GroupResult(table, kept), errors + bad_errors

    def _read(self, values, group: pa.BinaryArray, positions: list[int], skip: int) \
            -> tuple[pa.Table, list[int], list]:
        """The decodable records in `read_schema`, their positions, and (position, reason) of the others."""
        if self.wire is None:
            return self._from_records(*self._records(values, positions, skip))
        read, deferred = read_flat(group, skip, self.wire, self.read_schema)
        if not deferred.any():
            return read, positions, []
        slow, slow_kept, errors = self._from_records(
            *self._records(values, [positions[i] for i in np.flatnonzero(deferred)], skip))
        kept = [positions[i] for i in np.flatnonzero(~deferred)] + slow_kept
        both = pa.concat_tables([read.filter(pa.array(~deferred)), slow])
        order = np.argsort(kept, kind="stable")
        return both.take(pa.array(order)), [kept[i] for i in order], errors

    def _from_records(self, records: list[dict], kept: list[int], errors: list) -> tuple[pa.Table, list[int], list]:
        """fastavro's records as a table. A value Arrow refuses (an int beyond 32 bits: fastavro
        reads an int as it reads a long) rejects its record, not the whole chunk."""
        try:
            return pa.Table.from_pylist(records, schema=self.read_schema), kept, errors
        except (pa.ArrowInvalid, OverflowError):
            pass
        refused = [self._refused(record) for record in records]
        fits = [record for record, reason in zip(records, refused) if reason is None]
        return (pa.Table.from_pylist(fits, schema=self.read_schema),
                [position for position, reason in zip(kept, refused) if reason is None],
                errors + [(position, reason) for position, reason in zip(kept, refused) if reason is not None])

    def _refused(self, record: dict) -> str | None:
        for field in self.read_schema:
            try:
                pa.array([record.get(field.name)], field.type)
            except (pa.ArrowInvalid, OverflowError):
                avro_type = _AVRO_NAMES.get(field.type, str(field.type))
                return f"field '{field.name}': {record.get(field.name)!r} does not fit Avro {avro_type}"
        return None

    def _records(self, values, positions: list[int], skip: int) -> tuple[list[dict], list[int], list]:
        read, schema = fastavro.schemaless_reader, self.decode_schema
        records, kept, errors = [], [], []
        for position in positions:
            value = values[position]
            stream = BytesIO(value)
            stream.seek(skip)
            try:
                record = read(stream, schema, None)
            except DECODE_ERRORS as exc:
                errors.append((position, f"does not decode with {self.where}: {_explained(exc)}"))
                continue
            if stream.tell() != len(value):
                errors.append((position, f"does not decode with {self.where}: {len(value) - stream.tell()} bytes "
                                         f"left over after the record"))
                continue
            records.append(record)
            kept.append(position)
        return records, kept, errors

    def _table(self, read: pa.Table, zone: str) -> tuple[pa.Table, dict[int, str]]:
        """The records read as rows of the table's data columns, and (row, reason) of values that do not fit."""
        arrays, bad = [], {}
        for plan in self.columns:
            if plan.reader is None:
                arrays.append(pa.nulls(read.num_rows, plan.out_type))
                continue
            values = plan.reader.finish(read.column(plan.field_name).combine_chunks(), zone)
            array, column_bad = to_column(values, plan.column, plan.field_name, plan.out_type, zone,
                                          plan.reader.wall_clock)
            arrays.append(array)
            for row, reason in column_bad.items():
                bad.setdefault(row, reason)
        names = [plan.column.name for plan in self.columns]
        return pa.Table.from_arrays(arrays, names=names), bad


def _explained(exc: Exception) -> str:
    if isinstance(exc, EOFError):
        return "the payload ends before the record does"
    return f"{type(exc).__name__}: {exc}"
