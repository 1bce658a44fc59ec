"""The flat-record reader (etl.rows.decoders.avro_columns) against fastavro's, record for record:
on valid records of every wire type it reads, and on the same records truncated, extended,
with bytes flipped, and on random bytes, the decoder's rows, positions and reasons must be
what fastavro's path gives, with and without the Schema Registry framing."""
from __future__ import annotations

import dataclasses
import io
import json
import random
from decimal import Decimal

import fastavro
import pyarrow as pa
import pytest

from etl.model.schema import load_table_schema
from etl.rows.decoders import make_decoder
from etl.rows.decoders.avro import FIXED_SCHEMA, AvroPlan
from etl.rows.decoders.avro_columns import wire_types

DDL = """CREATE EXTERNAL TABLE IF NOT EXISTS ${database}.${table} (
  kafka_topic string, kafka_partition int, kafka_offset bigint, kafka_timestamp timestamp,
  event_id bigint, small int, user_id string, amount double, ratio float, ok boolean, ts timestamp,
  day date, status string, payload binary, code binary, note string, count bigint, price decimal(10,2),
  big decimal(38,0)
)
PARTITIONED BY (dt string, hour string)
STORED AS PARQUET
LOCATION '${location}'
"""
WRITER = {"type": "record", "name": "Flat", "namespace": "etl.test", "fields": [
    {"name": "event_id", "type": "long"},
    {"name": "small", "type": "int"},
    {"name": "user_id", "type": "string"},
    {"name": "amount", "type": "double"},
    {"name": "ratio", "type": "float"},
    {"name": "ok", "type": "boolean"},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["OK", "FAILED", "RETRY"]}},
    {"name": "payload", "type": "bytes"},
    {"name": "code", "type": {"type": "fixed", "name": "Code", "size": 3}},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "count", "type": ["long", "null"]},
    {"name": "extra", "type": ["null", "string", "double", "Status"]},  # the table lacks it: skipped
    {"name": "nothing", "type": "null"},
    {"name": "price", "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}]},
    {"name": "big", "type": {"type": "fixed", "name": "Big", "size": 16, "logicalType": "decimal", "precision": 38}},
    {"name": "unmapped", "type": {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 1}},
]}


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    ddl = tmp_path_factory.mktemp("ddl") / "flat.sql"
    ddl.write_text(DDL)
    return load_table_schema(ddl)


def record(chance: random.Random) -> dict:
    def maybe(value):
        return None if chance.random() < 0.2 else value
    text = "".join(chance.choice("aé€😀z\n\"") for _ in range(chance.randint(0, 12)))
    return {"event_id": chance.randint(-2**63, 2**63 - 1) if chance.random() < 0.3 else chance.randint(0, 999),
            "small": chance.randint(-2**31, 2**31 - 1), "user_id": text, "amount": chance.uniform(-1e300, 1e300),
            "ratio": chance.uniform(-1e3, 1e3), "ok": chance.random() < 0.5,
            "ts": chance.randint(-2**40, 2**42), "day": chance.randint(-719_162, 2_932_896),  # years 1 to 9999
            "status": chance.choice(["OK", "FAILED", "RETRY"]), "payload": chance.randbytes(chance.randint(0, 9)),
            "code": chance.randbytes(3), "note": maybe(text), "count": maybe(chance.randint(-5, 2**50)),
            "extra": chance.choice([None, text, 1.5, "RETRY"]), "nothing": None,
            "price": maybe(Decimal(chance.randint(-10**10 + 1, 10**10 - 1)).scaleb(-2)),
            "big": Decimal(chance.randint(-10**38 + 1, 10**38 - 1)),
            "unmapped": Decimal(chance.randint(-999, 999)).scaleb(-1)}


def encode(parsed, value: dict) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, parsed, value)
    return out.getvalue()


def damaged(chance: random.Random, good: bytes) -> bytes:
    how = chance.randrange(4)
    if how == 0 and good:
        return good[:chance.randrange(len(good))]
    if how == 1:
        return good + chance.randbytes(chance.randint(1, 3))
    if how == 2 and good:
        at = chance.randrange(len(good))
        return good[:at] + bytes([chance.randrange(256)]) + good[at + 1:]
    return chance.randbytes(chance.randint(0, 40))


def plans(table) -> tuple[AvroPlan, AvroPlan]:
    decoder = make_decoder("avro", table, "UTC", avro_schema=json.dumps(WRITER))
    fast = decoder.plan(FIXED_SCHEMA)
    assert isinstance(fast, AvroPlan) and fast.wire is not None  # else this test compares fastavro with itself
    return fast, dataclasses.replace(fast, wire=None)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("header", [b"", b"\x00\x00\x00\x00\x07"])
def test_the_flat_reader_agrees_with_fastavro_on_good_and_damaged_records(table, seed, header):
    chance = random.Random(seed)
    parsed = fastavro.parse_schema(WRITER)
    values = []
    for _ in range(400):
        body = encode(parsed, record(chance))
        values.append(header + (body if chance.random() < 0.7 else damaged(chance, body)))
    fast, slow = plans(table)
    positions = list(range(len(values)))
    got, got_errors = fast.decode(values, pa.array(values, pa.binary()), positions, len(header), "UTC")
    want, want_errors = slow.decode(values, pa.array(values, pa.binary()), positions, len(header), "UTC")
    assert sorted(got_errors) == sorted(want_errors)
    assert got.positions == want.positions
    assert got.table.equals(want.table)
    assert 150 < len(got.positions) < 400 and got_errors  # both kinds were there


def test_every_value_read_is_the_one_written(table):
    chance = random.Random(7)
    parsed = fastavro.parse_schema(WRITER)
    records = [record(chance) for _ in range(300)]
    values = [encode(parsed, r) for r in records]
    fast, _ = plans(table)
    result, errors = fast.decode(values, pa.array(values, pa.binary()), list(range(300)), 0, "UTC")
    assert errors == []
    rows = result.table.to_pylist()
    for written, row in zip(records, rows):
        assert row["event_id"] == written["event_id"] and row["user_id"] == written["user_id"]
        assert row["status"] == written["status"] and row["payload"] == written["payload"]
        assert row["note"] == written["note"] and row["count"] == written["count"]
        assert row["ok"] == written["ok"] and row["amount"] == written["amount"]
        assert row["price"] == written["price"] and row["big"] == written["big"]


@pytest.mark.parametrize(("field_type", "flat"), [
    ("long", True), (["null", "string"], True), ({"type": "enum", "name": "E", "symbols": ["A"]}, True),
    ({"type": "string", "logicalType": "uuid"}, True),
    ({"type": "record", "name": "R", "fields": [{"name": "a", "type": "long"}]}, False),
    ({"type": "array", "items": "long"}, False), ({"type": "map", "values": "long"}, False),
    ({"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 2}, True),
    ({"type": "fixed", "name": "F", "size": 8, "logicalType": "decimal", "precision": 18}, True),
    ({"type": "int", "logicalType": "custom"}, False),
    (["null", {"type": "array", "items": "long"}], False),
])
def test_which_writer_schemas_are_flat(field_type, flat):
    schema = fastavro.parse_schema({"type": "record", "name": "T", "fields": [{"name": "f", "type": field_type}]})
    assert (wire_types(schema, {}) is not None) == flat


@pytest.mark.parametrize("flat", [True, False])
def test_an_int_field_beyond_32_bits_rejects_its_record_not_the_chunk(table, flat):
    """Only a broken producer or damaged bytes can send one (fastavro reads an int as a long);
    Arrow refused it for the whole chunk, so one record failed the batch."""
    as_int = {**WRITER, "fields": [{"name": "small", "type": "int"}, {"name": "note", "type": "string"}]}
    as_long = {**as_int, "fields": [{"name": "small", "type": "long"}, {"name": "note", "type": "string"}]}
    values = [encode(fastavro.parse_schema(as_long), {"small": small, "note": "n"}) for small in (1, 2**40, -2**31)]
    decoder = make_decoder("avro", table, "UTC", avro_schema=json.dumps(as_int))
    if not flat:
        decoder._plans[FIXED_SCHEMA] = dataclasses.replace(decoder.plan(FIXED_SCHEMA), wire=None)
    decoded = decoder.decode(values)
    assert decoded.good.to_pylist() == [0, 2] and decoded.table.column("small").to_pylist() == [1, -2**31]
    assert decoded.errors == [(1, f"field 'small': {2**40} does not fit Avro int")]


def test_the_edges_of_every_range_read_as_written_and_as_fastavro_reads_them(table):
    """Years 1 and 9999 (timestamps and dates), the largest decimals both ways, the int and long
    limits (a long's 10-byte varint goes to fastavro), empty and 4-byte UTF-8 strings."""
    chance = random.Random(11)
    parsed = fastavro.parse_schema(WRITER)
    edges = [{"ts": -62_135_596_800_000, "day": -719_162, "price": Decimal("99999999.99"), "big": Decimal(10**38 - 1),
              "small": 2**31 - 1, "event_id": 2**62 - 1, "user_id": "", "note": "😀" * 3},
             {"ts": 253_402_300_799_999, "day": 2_932_896, "price": Decimal("-99999999.99"),
              "big": Decimal(-(10**38 - 1)), "small": -2**31, "event_id": -2**63, "user_id": "€"}]
    records = [{**record(chance), **edge} for edge in edges]
    values = [encode(parsed, r) for r in records]
    fast, slow = plans(table)
    got, errors = fast.decode(values, pa.array(values, pa.binary()), [0, 1], 0, "UTC")
    want, _ = slow.decode(values, pa.array(values, pa.binary()), [0, 1], 0, "UTC")
    assert errors == [] and got.table.equals(want.table)
    rows = got.table.to_pylist()
    for written, row in zip(records, rows):
        for name in ("price", "big", "small", "event_id", "user_id", "note"):
            assert row[name] == written[name], name
    assert [r["ts"].year for r in rows] == [1, 9999] and [r["day"].year for r in rows] == [1, 9999]
