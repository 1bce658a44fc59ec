"""The protobuf decoder: Protobuf messages in the Confluent framing (a magic byte, a schema id,
the message indexes, then the message), each parsed with the writer's own message type.

The writer schema is fetched in the registry's `serialized` format (a FileDescriptorProto),
its references first, into a descriptor pool of its own, so that no protoc is needed and two
versions of one .proto never meet. Each record costs one call into the compiled (upb) parser;
columns are then read from the parsed messages one field at a time (etl.rows.decoders.
protobuf_types). Records of one (schema id, message indexes) are decoded together.
"""
from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Sequence

import pyarrow as pa
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

from etl.model.schema import Column, TableSchema
from etl.rows.decoders.base import Decoded, Decoder, Unsupported
from etl.rows.decoders.framing import HEADER_BYTES, GroupResult, merged, split_frames, to_column, without_rows
from etl.rows.decoders.protobuf_types import FieldExtractor, extractor, suggested_hive_type
from etl.rows.decoders.writer_schemas import PROTOBUF, WriterSchema, WriterSchemas, unknown_schema_id

SERIALIZED = "serialized"  # the registry's format: base64 of a FileDescriptorProto


class ProtobufDecoder(Decoder):
    """Protobuf messages; their fields fill the data columns of the same name (case-insensitive)."""

    def __init__(self, schema: TableSchema, zone: str = "UTC", writer_schemas: WriterSchemas | None = None):
        super().__init__(schema, zone)
        if writer_schemas is None:
            raise ValueError("the protobuf decoder reads its schemas from a Schema Registry")
        self.writer_schemas = writer_schemas
        self._plans: dict[tuple, ProtobufPlan | str] = {}

    def __getstate__(self):
        return {**self.__dict__, "_plans": {}}  # plans hold message classes: built again in each task

    def decode(self, values: Sequence[bytes | None]) -> Decoded:
        frames = split_frames(values)
        errors = list(frames.errors)
        groups: dict[tuple, list[tuple[int, int]]] = {}
        for schema_id, positions in frames.by_schema_id.items():
            for position in positions:
                indexes, start = message_indexes(values[position])
                if indexes is None:
                    errors.append((position, "the message indexes after the schema id are cut short"))
                else:
                    groups.setdefault((schema_id, indexes), []).append((position, start))
        results, ignored = [], {}
        for key, members in groups.items():
            plan = self.plan(*key)
            if isinstance(plan, str):
                errors += [(position, plan) for position, _start in members]
                continue
            result, group_errors = plan.decode(values, members, self.zone)
            results.append(result)
            errors += group_errors
            for name in plan.ignored:
                ignored[name] = ignored.get(name, 0) + len(members)
        return merged(self.output_schema, results, errors, ignored)

    def plan(self, schema_id: int, indexes: tuple[int, ...] = (0,)) -> ProtobufPlan | str:
        """How records of this writer schema's message type become rows, or why none of them can."""
        key = (schema_id, indexes)
        if key in self._plans:
            return self._plans[key]
        writer = self.writer_schemas.by_id(schema_id, fmt=SERIALIZED)
        if writer is None:  # not kept: the registry may learn it (restored from a backup, say)
            return unknown_schema_id(schema_id, self.writer_schemas)
        self._plans[key] = self._plan_of(writer, indexes, f"schema id {schema_id}")
        return self._plans[key]

    def check(self, writer: WriterSchema, where: str) -> None:
        """Raises Unsupported when a column cannot hold its field in the message type the topic carries."""
        carried = self._carried_type(writer)
        if carried is not None:
            ProtobufPlan.of(carried, self.schema.data_columns, self.output_schema, f"{where} {carried.DESCRIPTOR.name}")

    def fields_of(self, writer: WriterSchema) -> list[tuple[str, str | None]]:
        """The carried message type's fields, each with the Hive type that would hold it (None: none)."""
        carried = self._carried_type(writer)
        return [(f.name, suggested_hive_type(f)) for f in carried.DESCRIPTOR.fields] if carried else []

    def _carried_type(self, writer: WriterSchema):
        """A subject's schema does not say which of its file's message types the topic carries: it
        is taken to be the top-level type sharing the most fields with the table (the first, on a tie)."""
        count = len(_file_descriptor(writer, "check.proto").message_type)
        classes = [self._message_class(writer, (index,)) for index in range(count)]
        columns = {column.name for column in self.schema.data_columns}
        shared = [sum(f.name.lower() in columns for f in c.DESCRIPTOR.fields) for c in classes]
        return classes[shared.index(max(shared))] if classes else None

    def _plan_of(self, writer: WriterSchema, indexes: tuple[int, ...], where: str) -> ProtobufPlan | str:
        if writer.schema_type != PROTOBUF:
            return f"{where} is a {writer.schema_type} schema, not Protobuf; set [job] decoder"
        try:
            return ProtobufPlan.of(self._message_class(writer, indexes), self.schema.data_columns,
                                   self.output_schema, where)
        except Unsupported as exc:
            return str(exc)

    def _message_class(self, writer: WriterSchema, indexes: tuple[int, ...]):
        pool = _pool_with_well_known_types()
        self._add_references(pool, writer, set())
        main = _file_descriptor(writer, f"schema-{writer.schema_id}.proto")
        try:
            pool.Add(main)
            return message_factory.GetMessageClass(pool.FindMessageTypeByName(_message_name(main, indexes)))
        except (TypeError, KeyError) as exc:  # what a pool raises on a file it cannot build
            raise Unsupported(f"schema id {writer.schema_id} does not build into message types: {exc}") from exc

    def _add_references(self, pool, writer: WriterSchema, added: set[str]) -> None:
        for reference in writer.references:
            if reference.name in added:
                continue
            added.add(reference.name)
            found = self.writer_schemas.version(reference.subject, reference.version, fmt=SERIALIZED)
            if found is None:
                raise Unsupported(f"it imports {reference.name} ({reference.subject} version {reference.version}), "
                                  f"which the Schema Registry does not have")
            self._add_references(pool, found, added)
            pool.Add(_file_descriptor(found, reference.name))


@dataclass(frozen=True)
class ColumnPlan:
    column: Column
    out_type: pa.DataType
    extractor: FieldExtractor | None  # None: the message has no such field, the column is NULL


@dataclass(frozen=True)
class ProtobufPlan:
    message_class: type
    columns: tuple[ColumnPlan, ...]
    ignored: tuple[str, ...]
    where: str

    @classmethod
    def of(cls, message_class, data_columns, output_schema: pa.Schema, where: str) -> ProtobufPlan:
        fields = {field.name.lower(): field for field in message_class.DESCRIPTOR.fields}
        columns = []
        for column, out in zip(data_columns, output_schema):
            field = fields.get(column.name.lower())
            try:
                columns.append(ColumnPlan(column, out.type, extractor(field, column) if field else None))
            except Unsupported as exc:
                raise Unsupported(f"{where}: field '{field.name}' {exc}; column {column.name} is "
                                  f"{column.hive_type}") from exc
        mapped = {plan.column.name for plan in columns if plan.extractor}
        ignored = tuple(field.name for name, field in fields.items() if name not in mapped)
        return cls(message_class, tuple(columns), ignored, where)

    def decode(self, values, members: list[tuple[int, int]], zone: str) -> tuple[GroupResult, list]:
        parse = self.message_class.FromString
        messages, kept, errors = [], [], []
        for position, start in members:
            try:
                messages.append(parse(memoryview(values[position])[start:]))
            except DecodeError as exc:
                errors.append((position, f"does not decode with {self.where}: {exc}"))
                continue
            kept.append(position)
        arrays, bad = [], {}
        for plan in self.columns:
            if plan.extractor is None:
                arrays.append(pa.nulls(len(messages), plan.out_type))
                continue
            read, unreadable = plan.extractor.read(messages)
            array, column_bad = to_column(read, plan.column, plan.extractor.field.name, plan.out_type, zone, False)
            arrays.append(array)
            for row, reason in unreadable + sorted(column_bad.items()):
                bad.setdefault(row, reason)
        table = pa.Table.from_arrays(arrays, names=[plan.column.name for plan in self.columns])
        table, kept, bad_errors = without_rows(table, kept, bad)
        return GroupResult(table, kept), errors + bad_errors


def message_indexes(value: bytes) -> tuple[tuple[int, ...] | None, int]:
    """The message indexes after the schema id (zigzag varints: a count, then the indexes; a
    lone 0 means the file's first message), and where the message starts."""
    if len(value) > HEADER_BYTES + 1:
        first, second = value[HEADER_BYTES], value[HEADER_BYTES + 1]
        if first == 0:
            return (0,), HEADER_BYTES + 1  # nearly every message: the first type of its file
        if first == 2 and second < 0x80:
            return ((second >> 1) ^ -(second & 1),), HEADER_BYTES + 2  # one index, one byte
    count, at = _zigzag_varint(value, HEADER_BYTES)
    indexes = []
    for _ in range(count if count is not None and count >= 0 else 0):
        index, at = _zigzag_varint(value, at)
        if index is None:
            return None, at
        indexes.append(index)
    return (tuple(indexes) or (0,)) if count is not None and count >= 0 else None, at


def _zigzag_varint(value: bytes, at: int) -> tuple[int | None, int]:
    result, shift = 0, 0
    while at < len(value) and shift < 64:
        byte = value[at]
        at += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), at
        shift += 7
    return None, at


def _file_descriptor(writer: WriterSchema, name: str) -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto()
    try:
        proto.ParseFromString(base64.standard_b64decode(writer.text))
    except (ValueError, DecodeError) as exc:
        raise Unsupported(f"{name} is not a serialized FileDescriptorProto ({exc}); the registry must serve "
                          f"format=serialized") from exc
    proto.name = name
    return proto


def _message_name(file: descriptor_pb2.FileDescriptorProto, indexes: tuple[int, ...]) -> str:
    """The full name of the message the indexes point at: top-level, then nested, types."""
    names, types = [], file.message_type
    for index in indexes:
        if index >= len(types):
            raise Unsupported(f"message indexes {list(indexes)} point at no message of the schema")
        names.append(types[index].name)
        types = types[index].nested_type
    return ".".join(([file.package] if file.package else []) + names)


def _pool_with_well_known_types() -> descriptor_pool.DescriptorPool:
    """A fresh pool holding the types a serializer never registers (google/protobuf/*, google/type/*)."""
    from google.protobuf import (
        any_pb2, duration_pb2, empty_pb2, field_mask_pb2, struct_pb2, timestamp_pb2, wrappers_pb2,
    )
    from google.type import date_pb2
    pool = descriptor_pool.DescriptorPool()
    for module in (descriptor_pb2, any_pb2, duration_pb2, empty_pb2, field_mask_pb2, struct_pb2, timestamp_pb2,
                   wrappers_pb2, date_pb2):
        pool.AddSerializedFile(module.DESCRIPTOR.serialized_pb)
    return pool
