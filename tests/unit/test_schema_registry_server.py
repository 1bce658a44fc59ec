"""The Schema Registry test server (tests/harness/schema_registry_server.py) against confluent-kafka's
real client over HTTP: the Avro and Protobuf serializers register, their deserializers fetch
writer schemas back, errors carry Confluent's codes, basic auth, the request log, and the
server in its own process keeps its ids across a restart and refuses connections once killed.

The `schema_registry` tests also run against a real registry when ETL_TEST_SCHEMA_REGISTRY_URL
is set (each keeps to subjects of its own topic); the others are about the test server itself.
"""
from __future__ import annotations

import base64
import json
import uuid

import httpx2
import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient, SchemaRegistryError
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, timestamp_pb2
from google.protobuf.message_factory import GetMessageClass

from tests.harness.schema_registry_server import SchemaRegistryServer

EVENT_V1 = {"type": "record", "name": "Event", "namespace": "etl.tests",
            "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}]}
EVENT_V2 = {**EVENT_V1, "fields": [*EVENT_V1["fields"], {"name": "country", "type": ["null", "string"],
                                                          "default": None}]}
FIELD = descriptor_pb2.FieldDescriptorProto
PROTO = {"use.deprecated.format": False}


def client_of(registry, **conf) -> SchemaRegistryClient:
    """A client that fails at once: the default is 3 retries, up to 1, 2 and 4 s apart."""
    return SchemaRegistryClient({"url": registry.url, "max.retries": 0, **conf})


def value_of(topic: str) -> SerializationContext:
    return SerializationContext(topic, MessageField.VALUE)


def schema_id_of(framed: bytes) -> int:
    return int.from_bytes(framed[1:5], "big")  # magic byte 0, then the id


@pytest.fixture
def topic() -> str:
    return f"etl-tests-{uuid.uuid4().hex[:12]}"


# -- Avro -------------------------------------------------------------------------------------
def test_avro_registers_evolves_and_round_trips(schema_registry, topic):
    producer = client_of(schema_registry)
    first = AvroSerializer(producer, json.dumps(EVENT_V1))({"id": 1, "name": "a"}, value_of(topic))
    v1 = schema_id_of(first)
    assert f"{topic}-value" in producer.get_subjects()
    assert json.loads(producer.get_schema(v1).schema_str) == EVENT_V1

    second = AvroSerializer(producer, json.dumps(EVENT_V2))({"id": 2, "name": "b", "country": "FR"}, value_of(topic))
    v2 = schema_id_of(second)
    latest = producer.get_latest_version(f"{topic}-value")
    assert v2 != v1 and (latest.version, latest.schema_id) == (2, v2)
    assert producer.get_versions(f"{topic}-value") == [1, 2]

    consumer = AvroDeserializer(client_of(schema_registry))  # a fresh cache: fetched over HTTP
    assert consumer(first, value_of(topic)) == {"id": 1, "name": "a"}
    assert consumer(second, value_of(topic)) == {"id": 2, "name": "b", "country": "FR"}


def test_the_same_schema_keeps_its_id_in_every_subject(schema_registry, topic):
    client = client_of(schema_registry)
    schema = Schema(json.dumps(EVENT_V1), "AVRO")
    first = client.register_schema_full_response(f"{topic}-value", schema)
    again = client_of(schema_registry).register_schema_full_response(f"{topic}-value", schema)
    elsewhere = client_of(schema_registry).register_schema_full_response(f"{topic}-other-value", schema)
    assert first.schema_id == again.schema_id == elsewhere.schema_id
    assert (first.version, again.version, elsewhere.version) == (1, 1, 1)


# -- Protobuf ---------------------------------------------------------------------------------
def message_class(files: list[descriptor_pb2.FileDescriptorProto], full_name: str):
    """The class of `full_name`, built at runtime from `files` (dependencies first) in a pool
    of its own, as a decoder would from a descriptor set."""
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    for file in files:
        pool.AddSerializedFile(file.SerializeToString())
    return GetMessageClass(pool.FindMessageTypeByName(full_name))


def proto_file(name: str, package: str, message: str, fields, dependencies=()) -> descriptor_pb2.FileDescriptorProto:
    """A proto3 file of one message; `fields` are (name, type, type_name or "")."""
    file = descriptor_pb2.FileDescriptorProto(name=name, package=package, syntax="proto3",
                                              dependency=list(dependencies))
    body = file.message_type.add(name=message)
    for number, (field, kind, type_name) in enumerate(fields, start=1):
        added = body.field.add(name=field, number=number, type=kind, label=FIELD.LABEL_OPTIONAL)
        if type_name:  # set, even empty, it would claim a message or enum type
            added.type_name = type_name
    return file


def decoded(schema: Schema) -> descriptor_pb2.FileDescriptorProto:
    return descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(schema.schema_str))


def test_protobuf_with_a_well_known_type_registers_no_reference(schema_registry, topic):
    package = f"etl.tests.u{uuid.uuid4().hex[:8]}"
    event = proto_file(f"{package.replace('.', '/')}/event.proto", package, "Event",
                       [("name", FIELD.TYPE_STRING, ""), ("at", FIELD.TYPE_MESSAGE, ".google.protobuf.Timestamp")],
                       dependencies=["google/protobuf/timestamp.proto"])
    Event = message_class([event], f"{package}.Event")
    message = Event(name="a")
    message.at.FromSeconds(1_700_000_000)

    framed = ProtobufSerializer(Event, client_of(schema_registry), PROTO)(message, value_of(topic))
    schema = client_of(schema_registry).get_schema(schema_id_of(framed), fmt="serialized")
    assert schema.schema_type == "PROTOBUF" and schema.references == []
    assert [f.name for f in decoded(schema).message_type[0].field] == ["name", "at"]
    assert ProtobufDeserializer(Event, PROTO, client_of(schema_registry))(framed, value_of(topic)) == message


def test_protobuf_with_a_dependency_registers_a_reference(schema_registry, topic):
    package = f"etl.tests.u{uuid.uuid4().hex[:8]}"
    folder = package.replace(".", "/")
    money = proto_file(f"{folder}/money.proto", package, "Money",
                       [("cents", FIELD.TYPE_INT64, ""), ("currency", FIELD.TYPE_STRING, "")])
    order = proto_file(f"{folder}/order.proto", package, "Order",
                       [("id", FIELD.TYPE_STRING, ""), ("total", FIELD.TYPE_MESSAGE, f".{package}.Money")],
                       dependencies=[money.name])
    Order = message_class([money, order], f"{package}.Order")
    message = Order(id="o-1")
    message.total.cents, message.total.currency = 1250, "EUR"

    framed = ProtobufSerializer(Order, client_of(schema_registry), PROTO)(message, value_of(topic))
    client = client_of(schema_registry)
    schema = client.get_schema(schema_id_of(framed), fmt="serialized")
    assert schema.references == [SchemaReference(money.name, money.name, 1)]  # its subject: the file's name
    assert decoded(schema).dependency == [money.name]
    assert decoded(client.get_latest_version(money.name, fmt="serialized").schema).message_type[0].name == "Money"
    assert ProtobufDeserializer(Order, PROTO, client_of(schema_registry))(framed, value_of(topic)) == message


# -- errors -----------------------------------------------------------------------------------
def registry_error(call, *args) -> SchemaRegistryError:
    with pytest.raises(SchemaRegistryError) as raised:
        call(*args)
    return raised.value


def test_errors_carry_confluents_codes(schema_registry, topic):
    client = client_of(schema_registry)
    unknown_id = registry_error(client.get_schema, 2_000_000_000)
    assert (unknown_id.http_status_code, unknown_id.error_code) == (404, 40403)
    unknown_subject = registry_error(client.get_latest_version, f"{topic}-value")
    assert (unknown_subject.http_status_code, unknown_subject.error_code) == (404, 40401)
    invalid = registry_error(client.register_schema, f"{topic}-value", Schema('{"type": "nope"}', "AVRO"))
    assert (invalid.http_status_code, invalid.error_code) == (422, 42201)
    dangling = Schema(json.dumps(EVENT_V1), "AVRO", [SchemaReference("etl.tests.Nowhere", f"{topic}-missing", 1)])
    assert registry_error(client.register_schema, f"{topic}-value", dangling).error_code == 42201

    client.register_schema(f"{topic}-value", Schema(json.dumps(EVENT_V1), "AVRO"))
    assert registry_error(client.get_version, f"{topic}-value", 7).error_code == 40402
    unknown_lookup = registry_error(client.lookup_schema, f"{topic}-value", Schema(json.dumps(EVENT_V2), "AVRO"))
    assert (unknown_lookup.http_status_code, unknown_lookup.error_code) == (404, 40403)


def test_basic_auth(tmp_path):
    with SchemaRegistryServer(tmp_path, auth="etl:secret") as registry:
        for conf in ({}, {"basic.auth.user.info": "etl:wrong"}):
            refused = registry_error(client_of(registry, **conf).get_subjects)
            assert (refused.http_status_code, refused.error_code) == (401, 40101)
        assert client_of(registry, **{"basic.auth.user.info": "etl:secret"}).get_subjects() == []


def test_soft_then_permanent_delete(schema_registry, topic):
    client = client_of(schema_registry)
    client.register_schema(f"{topic}-value", Schema(json.dumps(EVENT_V1), "AVRO"))
    assert client.delete_subject(f"{topic}-value") == [1]
    assert f"{topic}-value" not in client.get_subjects()
    assert registry_error(client.get_latest_version, f"{topic}-value").error_code == 40401
    assert client.delete_subject(f"{topic}-value", permanent=True) == [1]


# -- the request log and the server in its own process ----------------------------------------
def test_a_client_fetches_each_writer_schema_once(registry_process, topic):
    framed = AvroSerializer(client_of(registry_process), json.dumps(EVENT_V1))({"id": 1, "name": "a"},
                                                                                value_of(topic))
    for _ in range(2):  # two executors, each with its client
        consumer = AvroDeserializer(client_of(registry_process))
        for _ in range(3):
            consumer(framed, value_of(topic))
    assert registry_process.schema_fetches(schema_id_of(framed)) == 2
    assert registry_process.schema_fetches() == 2


def test_ids_survive_a_restart_and_a_kill(registry_process, topic):
    v1 = client_of(registry_process).register_schema(f"{topic}-value", Schema(json.dumps(EVENT_V1), "AVRO"))
    registry_process.stop()
    registry_process.start()
    v2 = client_of(registry_process).register_schema(f"{topic}-value", Schema(json.dumps(EVENT_V2), "AVRO"))
    registry_process.kill()
    registry_process.start()
    client = client_of(registry_process)
    assert json.loads(client.get_schema(v1).schema_str) == EVENT_V1
    assert client.register_schema(f"{topic}-value", Schema(json.dumps(EVENT_V2), "AVRO")) == v2
    assert (v1, v2, client.get_latest_version(f"{topic}-value").version) == (1, 2, 2)


def test_a_killed_registry_raises_a_transport_error(registry_process):
    client = client_of(registry_process)
    assert client.get_schema_types() == ["JSON", "PROTOBUF", "AVRO"]
    registry_process.kill()
    with pytest.raises(httpx2.ConnectError):  # an httpx2.TransportError: what the ETL must retry
        client.get_schema(1)


def test_a_stopped_thread_server_cuts_kept_alive_connections(tmp_path):
    registry = SchemaRegistryServer(tmp_path).start()
    client = client_of(registry)
    client.get_subjects()  # the connection stays open in the client's pool
    registry.stop()
    with pytest.raises(httpx2.ConnectError):
        client.get_subjects()
    registry.start()  # on the same port
    assert client.get_subjects() == []
    registry.stop()
