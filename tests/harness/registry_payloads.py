"""Message values as producers write them: confluent-kafka's own AvroSerializer and
ProtobufSerializer against a Schema Registry (the test server, or a real one), registering
their schemas as producers do. Protobuf message types are built at run time from a
FileDescriptorProto, so no protoc is needed.

The tests' event schemas, in versions: v1 the first one, v2 adds a field the table lacks and
makes `country` nullable, as a producer's schema evolves.
"""
from __future__ import annotations

import io
import json

import fastavro
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

_F = descriptor_pb2.FieldDescriptorProto

# The DDL the avro and protobuf tests load into (lineage columns first, as every table has).
EVENTS_DDL = """CREATE EXTERNAL TABLE IF NOT EXISTS ${database}.${table} (
  kafka_topic string, kafka_partition int, kafka_offset bigint, kafka_timestamp timestamp,
  user_id bigint, country string, amount decimal(10,2), ts timestamp, day date, status string,
  small int, payload binary, note string
)
PARTITIONED BY (dt string, hour string)
STORED AS PARQUET
LOCATION '${location}'
"""

_V1_FIELDS = [
    {"name": "user_id", "type": "long"},
    {"name": "country", "type": "string"},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["OK", "FAILED"]}},
    {"name": "small", "type": "long"},
    {"name": "payload", "type": ["null", "bytes"], "default": None},
]
AVRO_V1 = {"type": "record", "name": "Event", "namespace": "etl.test", "fields": _V1_FIELDS}
AVRO_V2 = {"type": "record", "name": "Event", "namespace": "etl.test", "fields": [
    *[f if f["name"] != "country" else {"name": "country", "type": ["null", "string"], "default": None}
      for f in _V1_FIELDS],
    {"name": "browser", "type": ["null", "string"], "default": None},
]}


def registry_client(url: str) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": url, "max.retries": 0})


class AvroProducerCodec:
    """Serializes records of one writer schema for one topic, as a producer would."""

    def __init__(self, client: SchemaRegistryClient, schema: dict, topic: str):
        self.serializer = AvroSerializer(client, json.dumps(schema))
        self.context = SerializationContext(topic, MessageField.VALUE)

    def __call__(self, record: dict) -> bytes:
        return self.serializer(record, self.context)


def plain_avro(schema: dict, record: dict) -> bytes:
    """A record as plain Avro, without the registry's framing ([job] avro_schema)."""
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def schema_id_of(value: bytes) -> int:
    return int.from_bytes(value[1:5], "big")


def event_message_class(package: str = "etl.test", extra_field: bool = False):
    """An Event message type: user_id int64, optional country, amount double, ts Timestamp,
    status enum, small int64, payload bytes; with `extra_field`, a `browser` the table lacks.
    A second message type, Other, comes first in the file so that Event's index is 1."""
    fields = [("user_id", _F.TYPE_INT64, None), ("country", _F.TYPE_STRING, None), ("amount", _F.TYPE_DOUBLE, None),
              ("ts", _F.TYPE_MESSAGE, ".google.protobuf.Timestamp"), ("status", _F.TYPE_ENUM, f".{package}.Status"),
              ("small", _F.TYPE_INT64, None), ("payload", _F.TYPE_BYTES, None)]
    if extra_field:
        fields.append(("browser", _F.TYPE_STRING, None))
    return _message_class(package, fields, optional=("country",), other_first=True)


def bench_message_class():
    """The benchmark's event (tests/perf/formats.py), the only type of its file."""
    fields = [("event_id", _F.TYPE_INT64, None), ("user_id", _F.TYPE_STRING, None), ("action", _F.TYPE_STRING, None),
              ("amount", _F.TYPE_DOUBLE, None), ("ts", _F.TYPE_MESSAGE, ".google.protobuf.Timestamp"),
              ("ok", _F.TYPE_BOOL, None), ("pad", _F.TYPE_STRING, None)]
    return _message_class("bench", fields)


def _message_class(package: str, fields: list, optional: tuple[str, ...] = (), other_first: bool = False):
    """A message type `Event` built at run time (proto3, a Status enum beside it); `optional`
    fields get presence; with `other_first`, a message Other precedes it in the file."""
    file = descriptor_pb2.FileDescriptorProto(name=f"{package.replace('.', '/')}/event.proto", package=package,
                                              syntax="proto3", dependency=["google/protobuf/timestamp.proto"])
    if other_first:
        file.message_type.add(name="Other").field.add(name="id", number=1, type=_F.TYPE_INT64,
                                                      label=_F.LABEL_OPTIONAL)
    event = file.message_type.add(name="Event")
    status = file.enum_type.add(name="Status")
    status.value.add(name="OK", number=0)
    status.value.add(name="FAILED", number=1)
    for number, (name, kind, type_name) in enumerate(fields, start=1):
        field = event.field.add(name=name, number=number, type=kind, label=_F.LABEL_OPTIONAL)
        if type_name:
            field.type_name = type_name
        if name in optional:  # proto3 `optional`: a synthetic oneof gives it presence
            field.proto3_optional = True
            field.oneof_index = len(event.oneof_decl)
            event.oneof_decl.add(name=f"_{name}")
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.Event"))


class ProtobufProducerCodec:
    """Serializes messages of one type for one topic, as a producer would."""

    def __init__(self, client: SchemaRegistryClient, message_class, topic: str):
        self.message_class = message_class
        self.serializer = ProtobufSerializer(message_class, client, {"use.deprecated.format": False})
        self.context = SerializationContext(topic, MessageField.VALUE)

    def __call__(self, **fields) -> bytes:
        message = self.message_class()
        for name, value in fields.items():
            if name == "ts":
                message.ts.FromMilliseconds(value)
            elif value is not None:
                setattr(message, name, value)
        return self.serializer(message, self.context)
