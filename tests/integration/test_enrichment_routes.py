"""[dimension] sections with [route] sections, on the real stack: one job, two routes, each with
its own dimensions. The first route's table (web requests) has none of the joined columns: its
transform is handed its transform-only dimension (ip_ranges) alone; the second route joins a
Parquet file (countries) on country_code. Then a batch left PLANNED is resumed after the file
changed: exit 1 under on_dimension_change = fail, nothing committed, and finished with the new
version under use_current. Every offset is once in its table or in the rejected table
(tests.harness.oracle). Without services: tests/unit/test_dimension_routes.py."""
from __future__ import annotations

import json
import uuid
from collections import Counter

import pytest

from etl.config import load_config
from etl.errors import DimensionChanged, InjectedFault
from etl.ops.run import run_job
from etl.model.batch import BatchState
from tests.harness.enrichment import enriched_schema
from tests.harness.oracle import check_exactly_once, hive_reader
from tests.harness.paths import REPO
from tests.integration.test_enrichment_job import committed, countries_parquet, countries_section, event, last_batch

DB = "etl_test"
WEB_REQUESTS = REPO / "warehouse_schema" / "web_requests.sql"
IP_RANGES = REPO / "conf" / "examples" / "ip_ranges.csv"
TRANSFORM = "etl.examples:minute_and_country"


def web_request(i: int, ip: str | None) -> bytes:
    return json.dumps({"log_time": f"2017-07-30 14:{i:02d}:00", "client_ip": ip, "method": "GET", "path": f"/p{i}",
                       "status": 200}).encode()


def produced(produce, topic: str, values: dict[int, list[bytes]]) -> Counter:
    return Counter({(topic, p, o): 1 for p, o in produce(topic, values)})


def test_each_route_joins_or_transforms_with_its_own_dimensions_and_a_changed_one_stops_the_resume(
        spark, new_topic, produce, write_config, warehouse_dir, tmp_path, monkeypatch):
    name = f"dr{uuid.uuid4().hex[:8]}"
    web, events = new_topic(1, f"{name}.web"), new_topic(2, f"{name}.events")
    expected = produced(produce, web, {0: [web_request(1, "81.2.69.160"), web_request(2, "8.8.8.8"),
                                           web_request(3, "10.1.2.3"), web_request(4, "not-an-ip")]})
    codes = ["DE", "FR", "XX", None]
    expected += produced(produce, events, {p: [event(p * 10 + i, codes[i], "u0") for i in range(4)] for p in range(2)})
    source = countries_parquet(tmp_path, {"DE": "Germany", "FR": "France"})
    sections = {"kafka": {"topics": None},
                "hive": {"table": None, "schema": None, "rejected_table": f"{name}_rejected"},
                "job": {"max_rejected_ratio": "0.5"},
                "dimension countries": countries_section(source),
                "dimension ip_ranges": {"source": f"file://{IP_RANGES}", "columns": "ip_from, ip_to, country"},
                # first: its table has none of the countries' columns, which are cast to the second's types
                "route web": {"topics": web, "table": f"{name}_web", "schema": str(WEB_REQUESTS),
                              "transform": TRANSFORM, "dimensions": "ip_ranges"},
                "route events": {"topics": events, "table": f"{name}_events",
                                 "schema": str(enriched_schema(tmp_path)), "dimensions": "countries"}}
    config = write_config(**sections)
    assert run_job(load_config(config)) == 0

    countries = {r.event_id: r.country_name for r in spark.sql(f"SELECT * FROM {DB}.{name}_events").collect()}
    assert countries == {p * 10 + i: {"DE": "Germany", "FR": "France"}.get(codes[i]) for p in range(2)
                         for i in range(4)}, countries
    web_rows = spark.sql(f"SELECT kafka_offset, country FROM {DB}.{name}_web ORDER BY kafka_offset").collect()
    assert [tuple(r) for r in web_rows] == [(0, "GB"), (1, "US"), (2, None)]
    batch = last_batch(config)
    assert batch.unmatched == {"countries": 4} and sorted(batch.dimensions) == ["countries", "ip_ranges"]
    check_exactly_once(hive_reader(spark), config, expected, warehouse_dir)

    more = produced(produce, events, {p: [event(100 + p, "DE", "u0")] for p in range(2)})
    monkeypatch.setenv("ETL_FAULT_POINT", "state:PLANNED")
    monkeypatch.setenv("ETL_FAULT_ACTION", "raise")
    with pytest.raises(InjectedFault):
        run_job(load_config(config))
    monkeypatch.delenv("ETL_FAULT_POINT")
    before = committed(config)
    countries_parquet(tmp_path, {"DE": "Deutschland", "FR": "Frankreich", "AT": "Oesterreich"})
    with pytest.raises(DimensionChanged) as failed:
        run_job(load_config(config))
    assert failed.value.exit_code == 1 and "dimension 'countries': pinned" in str(failed.value)
    assert last_batch(config).state is BatchState.PLANNED and committed(config) == before

    use_current = write_config(**{**sections, "job": {**sections["job"], "on_dimension_change": "use_current"}})
    assert run_job(load_config(use_current)) == 0
    spark.catalog.refreshTable(f"{DB}.{name}_events")  # this session listed its files before batch 2
    names = {r[0] for r in spark.sql(f"SELECT country_name FROM {DB}.{name}_events WHERE event_id >= 100").collect()}
    assert names == {"Deutschland"}
    assert [c.dimension for c in last_batch(use_current).dimension_changes] == ["countries"]
    oracle = check_exactly_once(hive_reader(spark), use_current, expected + more, warehouse_dir)
    print(f"[dimension-routes] {oracle.describe()}")
