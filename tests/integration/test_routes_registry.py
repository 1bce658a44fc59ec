"""Issue 30, a route with `schema = registry` on the real stack: one job, an Avro topic whose table
is derived from its value subject's latest schema in the Schema Registry test server, and a JSON
topic into a table of a DDL file. The derived table has the subject's fields as columns; a field
the next schema version adds is added to the table at the next run, new rows carry it and older
rows read NULL; every offset lands once across both tables (the oracle, `etl verify --deep`). A
version that retypes a field is refused, naming the subject and the route, nothing touched."""
from __future__ import annotations

import datetime as dt
import json
import uuid
from collections import Counter
from decimal import Decimal

from confluent_kafka.schema_registry import Schema

from etl.config.routes import table_name
from tests.harness.data import events_by_partition
from tests.harness.etl_process import run_etl
from tests.harness.oracle import check_exactly_once, hive_reader
from tests.harness.paths import EVENTS_SCHEMA
from tests.harness.registry_payloads import AVRO_V1, AVRO_V2, AvroProducerCodec, registry_client
from tests.harness.state import job_state

DB = "etl_test"
UTC = dt.timezone.utc
LINEAGE = ["kafka_topic", "kafka_partition", "kafka_offset", "kafka_timestamp"]


def _record(i: int, **more) -> dict:
    return {"user_id": i, "country": "ES", "amount": Decimal(i) / 100, "ts": dt.datetime(2026, 11, 24, 10, tzinfo=UTC),
            "day": dt.date(2026, 11, 24), "status": "OK", "small": i, "payload": None, **more}


def _rows(spark, table: str) -> dict[tuple[int, int], dict]:
    spark.sql(f"REFRESH TABLE `{DB}`.`{table}`")
    return {(r["kafka_partition"], r["kafka_offset"]): r.asDict()
            for r in spark.sql(f"SELECT * FROM `{DB}`.`{table}`").collect()}


def _columns(spark, table: str) -> list[str]:
    return [c.name for c in spark.catalog.listColumns(f"{DB}.{table}") if not c.isPartition]


def test_a_registry_route_s_table_follows_its_subject_beside_a_ddl_route_each_offset_once(
        spark, schema_registry, new_topic, produce, write_config, warehouse_dir):
    name = f"rr{uuid.uuid4().hex[:8]}"
    clicks, events = new_topic(2, f"{name}.clicks"), new_topic(1, f"{name}.events")
    client = registry_client(schema_registry.url)
    v1 = AvroProducerCodec(client, AVRO_V1, clicks)
    first = produce(clicks, {p: [v1(_record(p * 100 + i)) for i in range(4)] for p in range(2)})
    loaded = produce(events, events_by_partition(1, 3))
    config = write_config(
        kafka={"topics": None}, hive={"table": None, "schema": None, "rejected_table": f"{name}_rej"},
        schema_registry={"url": schema_registry.url},
        **{"route clicks": {"topics": clicks, "table": "{topic}", "schema": "registry", "decoder": "avro"},
           "route events": {"topics": events, "table": f"{name}_events", "schema": str(EVENTS_SCHEMA)}})
    table = table_name("{topic}", clicks)

    run = run_etl(config)
    assert run.returncode == 0, run.describe()
    assert _columns(spark, table) == LINEAGE + [f["name"] for f in AVRO_V1["fields"]]

    v2 = AvroProducerCodec(client, AVRO_V2, clicks)  # adds browser, a nullable field, at the end
    later = produce(clicks, {0: [v2(_record(500 + i, browser=f"b{i}")) for i in range(3)]})
    again = run_etl(config)
    assert again.returncode == 0, again.describe()
    assert _columns(spark, table) == LINEAGE + [f["name"] for f in AVRO_V2["fields"]]
    rows = _rows(spark, table)
    assert sorted(rows[(0, o)]["browser"] for _p, o in later) == ["b0", "b1", "b2"]
    assert all(rows[key]["browser"] is None for key in first) and rows[(1, 0)]["user_id"] == 100
    expected = Counter({(clicks, p, o): 1 for p, o in first + later}) + Counter({(events, p, o): 1 for p, o in loaded})
    check_exactly_once(hive_reader(spark), config, expected, warehouse_dir)  # and `etl verify --deep` exits 0

    retyped = {**AVRO_V2, "fields": [{**f, "type": "string"} if f["name"] == "small" else f for f in AVRO_V2["fields"]]}
    client.register_schema(f"{clicks}-value", Schema(json.dumps(retyped), "AVRO"))
    produce(clicks, {1: [AvroProducerCodec(client, retyped, clicks)(_record(900, small="x", browser=None))]})
    committed = job_state(config).committed
    refused = run_etl(config)
    assert refused.returncode == 2, refused.describe()
    assert f"subject {clicks}-value" in refused.stderr and "[route clicks]" in refused.stderr, refused.describe()
    assert "column 'small'" in refused.stderr and "register a schema version that keeps" in refused.stderr, \
        refused.describe()
    assert job_state(config).committed == committed and _columns(spark, table)[-1] == "browser"
