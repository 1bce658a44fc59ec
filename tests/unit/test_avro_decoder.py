"""The avro decoder against the Schema Registry test server, with payloads written by
confluent-kafka's own AvroSerializer: versions, logical types, bad input, the start-up check,
the per-process schema cache, and a registry that does not answer."""
from __future__ import annotations

import datetime as dt
import json
import random
from decimal import Decimal

import pytest

from etl.config import RetryConfig, SchemaRegistryConfig
from etl.errors import ConfigError, SchemaRegistryUnavailable
from etl.model.schema import load_table_schema
from etl.rows.decoders import make_decoder
from etl.rows.decoders.startup import check_writer_schemas
from etl.rows.decoders.writer_schemas import WriterSchemas
from tests.harness.registry_payloads import (
    AVRO_V1, AVRO_V2, EVENTS_DDL, AvroProducerCodec, plain_avro, registry_client, schema_id_of,
)
from tests.harness.ports import free_port

UTC = dt.timezone.utc
RECORD = {"user_id": 7, "country": "ES", "amount": Decimal("12.34"),
          "ts": dt.datetime(1969, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC), "day": dt.date(2026, 11, 24),
          "status": "FAILED", "small": 3, "payload": b"\x00\xff"}
ONE_TRY = RetryConfig(attempts=1)


@pytest.fixture
def table(tmp_path):
    ddl = tmp_path / "events.sql"
    ddl.write_text(EVENTS_DDL)
    return load_table_schema(ddl)


def decoder_for(table, url: str, zone: str = "UTC", retry: RetryConfig = ONE_TRY):
    return make_decoder("avro", table, zone, writer_schemas=WriterSchemas(SchemaRegistryConfig({"url": url}), retry))


def test_two_writer_versions_decode_in_input_order_with_types_and_ignored_fields(schema_registry, table):
    client = registry_client(schema_registry.url)
    v1, v2 = AvroProducerCodec(client, AVRO_V1, "clicks"), AvroProducerCodec(client, AVRO_V2, "clicks")
    values = [v1(RECORD), v2({**RECORD, "user_id": 8, "country": None, "browser": "firefox"}),
              v1({**RECORD, "user_id": 9})]
    assert schema_id_of(values[0]) != schema_id_of(values[1])
    decoded = decoder_for(table, schema_registry.url).decode(values)
    assert decoded.errors == []
    assert decoded.good.to_pylist() == [0, 1, 2]
    rows = decoded.table.to_pylist()
    assert [r["user_id"] for r in rows] == [7, 8, 9]
    assert rows[1]["country"] is None and rows[0]["country"] == "ES"
    assert rows[0]["amount"] == Decimal("12.34") and rows[0]["day"] == dt.date(2026, 11, 24)
    # timestamp-micros floored to the column's milliseconds, before 1970 too
    assert rows[0]["ts"] == dt.datetime(1969, 12, 31, 23, 59, 59, 999_000)
    assert rows[0]["status"] == "FAILED" and rows[0]["payload"] == b"\x00\xff" and rows[0]["note"] is None
    assert decoded.ignored_fields == {"browser": 1}


def test_bad_records_are_rejected_with_their_reasons_and_the_good_kept(schema_registry, table):
    encode = AvroProducerCodec(registry_client(schema_registry.url), AVRO_V1, "clicks")
    good = encode(RECORD)
    values = [good, b"\x01" + good[1:], b"\x00\x00", good[:5] + good[5:-4], good + b"zz",
              b"\x00" + (999_999).to_bytes(4, "big") + good[5:], encode({**RECORD, "small": 2**40}), None, good]
    decoded = decoder_for(table, schema_registry.url).decode(values)
    reasons = dict(decoded.errors)
    assert decoded.good.to_pylist() == [0, 8]
    assert "unknown magic byte 0x01" in reasons[1]
    assert "too short for the Schema Registry framing" in reasons[2]
    assert "ends before the record does" in reasons[3]
    assert "2 bytes left over" in reasons[4]
    assert "unknown schema id 999999" in reasons[5]
    assert reasons[6] == f"field 'small': {2**40} does not fit int"
    assert reasons[7] == "empty message"


def test_random_payloads_never_raise(schema_registry, table):
    good = AvroProducerCodec(registry_client(schema_registry.url), AVRO_V1, "clicks")(RECORD)
    chance = random.Random(20261124)
    values = [good[:5] + bytes(chance.randrange(256) for _ in range(chance.randrange(40))) for _ in range(3000)]
    decoded = decoder_for(table, schema_registry.url).decode(values)
    assert len(decoded.good) + len(decoded.errors) == len(values)


def test_local_timestamps_are_wall_clock_in_the_partition_zone(schema_registry, table):
    schema = {**AVRO_V1, "fields": [{"name": "ts", "type": {"type": "long", "logicalType": "local-timestamp-millis"}}]}
    encode = AvroProducerCodec(registry_client(schema_registry.url), schema, "clicks")
    wall = dt.datetime(2026, 7, 1, 12, 0)  # 10:00 UTC in Madrid's summer
    skipped = dt.datetime(2026, 3, 29, 2, 30)  # a spring change skips it
    decoded = decoder_for(table, schema_registry.url, zone="Europe/Madrid").decode([encode({"ts": wall}),
                                                                                    encode({"ts": skipped})])
    assert decoded.table.column("ts").to_pylist() == [dt.datetime(2026, 7, 1, 10, 0)]
    assert "does not exist in Europe/Madrid" in decoded.errors[0][1]


def test_plain_avro_with_a_fixed_schema(table):
    decoder = make_decoder("avro", table, avro_schema=json.dumps(AVRO_V1))
    decoded = decoder.decode([plain_avro(AVRO_V1, RECORD), b"\x02"])
    assert decoded.table.column("user_id").to_pylist() == [7]
    assert decoded.errors[0][0] == 1


def test_a_column_that_cannot_hold_its_field_is_refused_at_start_up_naming_both(schema_registry, table):
    bad = {**AVRO_V1, "fields": [{"name": "user_id", "type": "string"},
                                 {"name": "note", "type": {"type": "record", "name": "N", "fields": []}}]}
    AvroProducerCodec(registry_client(schema_registry.url), bad, "clicks")({"user_id": "x", "note": {}})
    with pytest.raises(ConfigError, match=r"field 'user_id' is Avro string, which a bigint column cannot hold.*"
                                          r"column user_id is bigint"):
        check_writer_schemas(decoder_for(table, schema_registry.url), ("clicks",), "events.sql")
    check_writer_schemas(decoder_for(table, schema_registry.url), ("no-such-topic",), "events.sql")  # nothing yet


def test_each_schema_is_fetched_once_per_process_not_once_per_task(registry_process, table):
    encode = AvroProducerCodec(registry_client(registry_process.url), AVRO_V1, "clicks")
    values = [encode({**RECORD, "user_id": i}) for i in range(10)]
    for _task in range(3):  # a fresh decoder each time, as each Spark task unpickles its own
        assert len(decoder_for(table, registry_process.url).decode(values).good) == 10
    assert registry_process.schema_fetches(schema_id_of(values[0])) == 1


def test_a_registry_that_does_not_answer_fails_the_chunk_instead_of_rejecting_it(table):
    url = f"http://127.0.0.1:{free_port()}"
    value = b"\x00" + (1).to_bytes(4, "big") + b"\x0e"
    with pytest.raises(SchemaRegistryUnavailable, match="did not answer"):
        decoder_for(table, url, retry=RetryConfig(attempts=2, initial_wait_seconds=0.01)).decode([value])


def test_uuids_and_times_of_day_read_as_their_text_and_numbers(table):
    schema = {"type": "record", "name": "U", "fields": [
        {"name": "note", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "small", "type": {"type": "int", "logicalType": "time-millis"}}]}
    decoder = make_decoder("avro", table, avro_schema=json.dumps(schema))
    value = plain_avro(schema, {"note": "8c7f3c9e-1f7e-4f44-9a35-1b2b0e4c2a11", "small": dt.time(0, 0, 1)})
    decoded = decoder.decode([value])
    assert decoded.errors == []
    assert decoded.table.to_pylist()[0]["note"] == "8c7f3c9e-1f7e-4f44-9a35-1b2b0e4c2a11"
    assert decoded.table.to_pylist()[0]["small"] == 1000


def test_a_schema_whose_named_type_is_registered_under_another_subject_decodes(schema_registry, table):
    from confluent_kafka.schema_registry import Schema, SchemaReference
    client = registry_client(schema_registry.url)
    status = {"type": "enum", "name": "Status", "namespace": "shop", "symbols": ["OK", "FAILED"]}
    client.register_schema("shop.Status", Schema(json.dumps(status), "AVRO"))
    order = {"type": "record", "name": "Order", "namespace": "shop",
             "fields": [{"name": "user_id", "type": "long"}, {"name": "status", "type": "shop.Status"}]}
    schema_id = client.register_schema("orders-value", Schema(json.dumps(order), "AVRO",
                                                              [SchemaReference("shop.Status", "shop.Status", 1)]))
    whole = {**order, "fields": [order["fields"][0], {"name": "status", "type": status}]}
    value = b"\x00" + schema_id.to_bytes(4, "big") + plain_avro(whole, {"user_id": 5, "status": "FAILED"})
    decoded = decoder_for(table, schema_registry.url).decode([value])
    assert decoded.errors == []
    assert decoded.table.to_pylist()[0]["status"] == "FAILED"
