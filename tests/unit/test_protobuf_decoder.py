"""The protobuf decoder against the Schema Registry test server, with payloads written by
confluent-kafka's own ProtobufSerializer: message indexes, well-known types, presence, enums,
a schema that imports another, bad input and the start-up check."""
from __future__ import annotations

import datetime as dt

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from etl.config import RetryConfig, SchemaRegistryConfig
from etl.errors import ConfigError
from etl.model.schema import load_table_schema
from etl.rows.decoders import make_decoder
from etl.rows.decoders.protobuf import message_indexes
from etl.rows.decoders.startup import check_writer_schemas
from etl.rows.decoders.writer_schemas import WriterSchemas
from tests.harness.registry_payloads import EVENTS_DDL, ProtobufProducerCodec, event_message_class, registry_client

FIELDS = dict(user_id=7, country="ES", amount=12.5, ts=1_767_225_600_123, status=1, small=3, payload=b"\x00\xff")
F = descriptor_pb2.FieldDescriptorProto


@pytest.fixture
def table(tmp_path):
    ddl = tmp_path / "events.sql"
    ddl.write_text(EVENTS_DDL.replace("amount decimal(10,2)", "amount double"))
    return load_table_schema(ddl)


def decoder_for(table, url: str):
    registry = WriterSchemas(SchemaRegistryConfig({"url": url}), RetryConfig(attempts=1))
    return make_decoder("protobuf", table, writer_schemas=registry)


def test_messages_decode_by_their_indexes_with_presence_enums_and_timestamps(schema_registry, table):
    client = registry_client(schema_registry.url)
    v1 = ProtobufProducerCodec(client, event_message_class(), "clicks")
    v2 = ProtobufProducerCodec(client, event_message_class(extra_field=True), "clicks")
    values = [v1(**FIELDS), v2(**{**FIELDS, "user_id": 8, "country": None, "browser": "firefox"})]
    assert message_indexes(values[0])[0] == (1,)  # Event is the file's second message type
    decoded = decoder_for(table, schema_registry.url).decode(values)
    assert decoded.errors == []
    rows = decoded.table.to_pylist()
    assert [r["user_id"] for r in rows] == [7, 8]
    assert rows[0]["country"] == "ES" and rows[1]["country"] is None  # proto3 optional: NULL when unset
    assert rows[0]["ts"] == dt.datetime(2026, 1, 1, 0, 0, 0, 123_000)
    assert rows[0]["status"] == "FAILED" and rows[0]["payload"] == b"\x00\xff" and rows[0]["amount"] == 12.5
    assert rows[0]["day"] is None and rows[0]["note"] is None  # fields the message lacks
    assert decoded.ignored_fields == {"browser": 1}


def test_bad_records_are_rejected_with_their_reasons(schema_registry, table):
    encode = ProtobufProducerCodec(registry_client(schema_registry.url), event_message_class(), "clicks")
    good = encode(**FIELDS)
    unknown_enum = encode(**{**FIELDS, "status": 5})
    values = [good, good[:-3], b"\x00" + (4242).to_bytes(4, "big") + b"\x00", encode(**{**FIELDS, "small": 2**40}),
              good[:5] + b"\x02\x0a", unknown_enum]
    decoded = decoder_for(table, schema_registry.url).decode(values)
    reasons = dict(decoded.errors)
    assert decoded.good.to_pylist() == [0]
    assert "does not decode with schema id" in reasons[1]
    assert "unknown schema id 4242" in reasons[2]
    assert reasons[3] == f"field 'small': {2**40} does not fit int"
    assert "point at no message" in reasons[4]
    assert "5 is not a value of enum etl.test.Status" in reasons[5]


def test_a_schema_that_imports_another_is_built_from_its_references(schema_registry, table):
    common = descriptor_pb2.FileDescriptorProto(name="shop/common.proto", package="shop", syntax="proto3")
    common.enum_type.add(name="Country").value.add(name="ES", number=0)
    order = descriptor_pb2.FileDescriptorProto(name="shop/order.proto", package="shop", syntax="proto3",
                                               dependency=["shop/common.proto"])
    message = order.message_type.add(name="Order")
    message.field.add(name="user_id", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    message.field.add(name="country", number=2, type=F.TYPE_ENUM, type_name=".shop.Country", label=F.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(common)
    pool.Add(order)
    encode = ProtobufProducerCodec(registry_client(schema_registry.url),
                                   message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order")), "orders")
    decoded = decoder_for(table, schema_registry.url).decode([encode(user_id=5, country=0)])
    assert decoded.errors == []
    assert decoded.table.to_pylist()[0]["country"] == "ES"


def test_a_column_that_cannot_hold_its_field_is_refused_at_start_up(schema_registry, table):
    ProtobufProducerCodec(registry_client(schema_registry.url), event_message_class(), "clicks")(**FIELDS)
    narrow = load_table_schema_with(table, "user_id bigint", "user_id boolean")
    with pytest.raises(ConfigError, match=r"Event: field 'user_id' is int64, which a boolean column cannot hold"):
        check_writer_schemas(decoder_for(narrow, schema_registry.url), ("clicks",), "events.sql")


def load_table_schema_with(table, old: str, new: str):
    from etl.model.schema import Column, TableSchema
    name, hive_type = new.split()
    columns = tuple(Column(name, hive_type) if c.name == name else c for c in table.columns)
    return TableSchema(columns, table.partition_columns, table.key_column)
