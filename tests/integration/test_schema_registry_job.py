"""Avro and Protobuf topics through the whole job, on the real stack: the broker, ZooKeeper,
Spark and the metastore, with writer schemas in the Schema Registry test server (or the real
registry $ETL_TEST_SCHEMA_REGISTRY_URL names), reached over HTTP by the Spark executors.
Payloads are written by confluent-kafka's own serializers, as producers write them."""
from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
from collections import Counter
from decimal import Decimal

import pytest

from tests.harness.campaign import campaign_seed, kill_campaign
from tests.harness.data import DataSource
from tests.harness.etl_process import ETL, EtlProcess, run_etl
from tests.harness.oracle import check_exactly_once, hive_reader, table_offsets
from tests.harness.recovery import recover_or_run
from tests.harness.registry_payloads import (
    AVRO_V1, AVRO_V2, EVENTS_DDL, AvroProducerCodec, ProtobufProducerCodec, event_message_class, registry_client,
)
from tests.harness.state import job_state

DB = "etl_test"
UTC = dt.timezone.utc


def avro_record(i: int, **changes) -> dict:
    return {"user_id": i, "country": "ES", "amount": Decimal(i) / 100, "ts": dt.datetime(2026, 11, 24, 10, tzinfo=UTC)
            + dt.timedelta(microseconds=i * 1001), "day": dt.date(2026, 11, 24), "status": "OK", "small": i % 1000,
            "payload": None, **changes}


@pytest.fixture
def events_ddl(tmp_path):
    ddl = tmp_path / "avro_events.sql"
    ddl.write_text(EVENTS_DDL)
    return ddl


def registry_config(write_config, topic, ddl, url, decoder="avro", **sections):
    return write_config(kafka={"topics": topic}, job={"decoder": decoder, **sections.pop("job", {})},
                        hive={"schema": str(ddl)}, schema_registry={"url": url}, **sections)


def rows_of(spark, table: str) -> dict[tuple[int, int], dict]:
    spark.sql(f"REFRESH TABLE `{DB}`.`{table}`")
    return {(r["kafka_partition"], r["kafka_offset"]): r.asDict()
            for r in spark.sql(f"SELECT * FROM `{DB}`.`{table}`").collect()}


def test_avro_records_of_several_schema_versions_land_once_through_hive(
        spark, schema_registry, new_topic, produce, write_config, hive_table_name, warehouse_dir, events_ddl):
    topic = new_topic(partitions=2)
    client = registry_client(schema_registry.url)
    v1, v2 = AvroProducerCodec(client, AVRO_V1, topic), AvroProducerCodec(client, AVRO_V2, topic)
    values = {p: [v1(avro_record(p * 100 + i)) if i % 3 else v2(avro_record(p * 100 + i, country=None,
                                                                              browser="firefox"))
                  for i in range(60)] for p in range(2)}
    delivered = produce(topic, values)
    config = registry_config(write_config, topic, events_ddl, schema_registry.url)

    result = run_etl(config)
    assert result.returncode == 0, result.describe()
    assert "fields not in the table, ignored: browser (40 records)" in result.stdout + result.stderr

    expected = Counter({(topic, p, o): 1 for p, o in delivered})
    check_exactly_once(hive_reader(spark), config, expected, warehouse_dir)
    rows = rows_of(spark, hive_table_name)
    first = rows[(0, 1)]  # user 1, written with v1
    assert first["user_id"] == 1 and first["country"] == "ES" and first["amount"] == Decimal("0.01")
    assert first["ts"] == dt.datetime(2026, 11, 24, 10, 0, 0, 1000)  # 1001 us, floored to the millisecond
    assert first["day"] == dt.date(2026, 11, 24) and first["status"] == "OK" and first["note"] is None
    assert rows[(1, 0)]["user_id"] == 100 and rows[(1, 0)]["country"] is None  # v2's nullable union, unset


def test_protobuf_records_land_once_through_hive(
        spark, schema_registry, new_topic, produce, write_config, hive_table_name, warehouse_dir, tmp_path):
    ddl = tmp_path / "proto_events.sql"
    ddl.write_text(EVENTS_DDL.replace("amount decimal(10,2)", "amount double"))
    topic = new_topic(partitions=2)
    encode = ProtobufProducerCodec(registry_client(schema_registry.url), event_message_class(), topic)
    delivered = produce(topic, {p: [encode(user_id=p * 100 + i, country=None if i % 2 else "ES", amount=i / 4,
                                           ts=1_764_000_000_000 + i, status=i % 2, small=i, payload=b"\x01")
                                    for i in range(50)] for p in range(2)})
    config = registry_config(write_config, topic, ddl, schema_registry.url, decoder="protobuf")

    result = run_etl(config)
    assert result.returncode == 0, result.describe()
    check_exactly_once(hive_reader(spark), config, Counter({(topic, p, o): 1 for p, o in delivered}), warehouse_dir)
    row = rows_of(spark, hive_table_name)[(1, 3)]
    assert (row["user_id"], row["country"], row["amount"], row["status"]) == (103, None, 0.75, "FAILED")
    assert row["ts"] == dt.datetime(2025, 11, 24, 16, 0, 0, 3000) and row["payload"] == b"\x01"


def test_bad_records_go_to_the_rejected_table_with_reasons_and_verify_deep_passes(
        spark, schema_registry, new_topic, produce, write_config, hive_table_name, warehouse_dir, events_ddl):
    topic = new_topic(partitions=1)
    encode = AvroProducerCodec(registry_client(schema_registry.url), AVRO_V1, topic)
    good = encode(avro_record(1))
    bad = {b"\x07" + good[1:]: "unknown magic byte 0x07",
           b"\x00" + (987_654).to_bytes(4, "big") + good[5:]: "unknown schema id 987654",
           good[:-6]: "does not decode with schema id",
           encode(avro_record(2, small=3_000_000_000)): "field 'small': 3000000000 does not fit int"}
    values = [good, *bad, encode(avro_record(3))]
    delivered = produce(topic, {0: values})
    config = registry_config(write_config, topic, events_ddl, schema_registry.url, job={"max_rejected_ratio": "0.9"})

    result = run_etl(config)
    assert result.returncode == 0, result.describe()
    check_exactly_once(hive_reader(spark), config, Counter({(topic, p, o): 1 for p, o in delivered}), warehouse_dir)
    rejected = rows_of(spark, f"{hive_table_name}_rejected")
    assert sorted(rejected) == [(0, 1), (0, 2), (0, 3), (0, 4)]
    for (_p, offset), reason in zip(sorted(rejected), bad.values()):
        assert reason in rejected[(0, offset)]["error"]
        assert rejected[(0, offset)]["raw_value"] == values[offset]


def test_a_registry_stopped_mid_batch_fails_the_run_and_the_next_run_resumes_exactly_once(
        spark, registry_process, new_topic, produce, write_config, hive_table_name, warehouse_dir, events_ddl):
    topic = new_topic(partitions=2)
    encode = AvroProducerCodec(registry_client(registry_process.url), AVRO_V1, topic)
    delivered = produce(topic, {p: [encode(avro_record(i)) for i in range(30)] for p in range(2)})
    config = registry_config(write_config, topic, events_ddl, registry_process.url)

    run = EtlProcess(config, fault="state:PLANNED", action="sleep:6")
    run.wait_until(lambda: "PLANNED" in run.stderr + run.stdout, 120, "the batch to be planned")
    registry_process.stop()  # the driver has checked the latest schema; the tasks still need schema ids
    assert run.wait(180) == 75, run.describe()  # SchemaRegistryUnavailable in a task: a retry helps
    assert "did not answer" in run.stderr, run.stderr[-3000:]
    assert job_state(config).open_state == "PLANNED"

    registry_process.start()
    resumed = run_etl(config)
    assert resumed.returncode == 0, resumed.describe()
    assert "resuming batch 1" in resumed.stderr
    check_exactly_once(hive_reader(spark), config, Counter({(topic, p, o): 1 for p, o in delivered}), warehouse_dir)
    assert not table_offsets(spark, DB, f"{hive_table_name}_rejected")  # nothing rejected for the outage


def test_schema_suggest_prints_the_columns_the_latest_schema_adds(schema_registry, new_topic, write_config,
                                                                 events_ddl):
    topic = new_topic(partitions=1)
    schema = {**AVRO_V2, "fields": [*AVRO_V2["fields"], {"name": "Visits", "type": "int"},
                                    {"name": "tags", "type": {"type": "array", "items": "string"}}]}
    AvroProducerCodec(registry_client(schema_registry.url), schema, topic)(avro_record(1, Visits=3, tags=[]))
    config = registry_config(write_config, topic, events_ddl, schema_registry.url)

    text = subprocess.run([ETL, "schema", "suggest", "--config", str(config)], capture_output=True, text=True,
                          timeout=120)
    assert text.returncode == 0, text.stderr
    assert "  , browser string\n  , visits int\n  -- tags: no column type holds it" in text.stdout
    suggested = json.loads(subprocess.run([ETL, "schema", "suggest", "--config", str(config), "--json"],
                                          capture_output=True, text=True, timeout=120).stdout)
    assert suggested[0]["columns"] == [{"name": "browser", "type": "string"}, {"name": "visits", "type": "int"}]


@pytest.mark.slow
def test_random_sigkills_with_the_avro_decoder_then_completion_is_exactly_once(
        spark, zk, schema_registry, new_topic, produce, write_config, warehouse_dir, events_ddl):
    seed = campaign_seed("ETL_AVRO_CRASH_SEED", 20261124)
    kills = int(os.environ.get("ETL_AVRO_CRASH_KILLS", "2"))  # the JSON campaigns kill 10 more (8 + 2 by event time)
    print(f"[avro-campaign] {seed}, {kills} kills (ETL_AVRO_CRASH_KILLS)", flush=True)
    topic = new_topic(partitions=3)
    encode = AvroProducerCodec(registry_client(schema_registry.url), AVRO_V1, topic)
    source = DataSource(topic, 3, produce, make_event=lambda i: encode(avro_record(i)))
    source.produce(120)
    config = registry_config(write_config, topic, events_ddl, schema_registry.url,
                             job={"max_records_per_partition": "40"}, zookeeper={"session_timeout_seconds": "4"})
    baseline = run_etl(config)
    assert baseline.returncode == 0, baseline.describe()

    campaign = kill_campaign(config, zk, source, warehouse_dir, kills=kills, seed=seed.value,
                             baseline_seconds=baseline.seconds, read_table=hive_reader(spark),
                             min_backlog=120 * 3, max_backlog=240 * 3)
    assert len(campaign.kills) == kills
    recover_or_run(config)
    check_exactly_once(hive_reader(spark), config, source.expected, warehouse_dir)


def test_a_column_that_cannot_hold_its_field_exits_2_before_anything_is_touched(
        schema_registry, new_topic, produce, write_config, events_ddl, zk, zk_root):
    topic = new_topic(partitions=1)
    produce(topic, {0: [AvroProducerCodec(registry_client(schema_registry.url), AVRO_V1, topic)(avro_record(1))]})
    events_ddl.write_text(EVENTS_DDL.replace("small int", "small boolean"))
    config = registry_config(write_config, topic, events_ddl, schema_registry.url)

    result = run_etl(config)
    assert result.returncode == 2, result.describe()
    assert f"subject {topic}-value (schema id " in result.stderr, result.stderr[-2000:]
    assert "field 'small' is Avro long, which a boolean column cannot hold" in result.stderr
    assert zk.exists(zk_root) is None  # no lock taken, no znode created
