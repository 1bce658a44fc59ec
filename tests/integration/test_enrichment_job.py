"""Enrichment by lookup on the real stack: a CSV file and a Hive table enrich the same events,
unmatched keys are NULL and counted, and a dimension that changes between a SIGKILL and the
resume is handled as [job] on_dimension_change says. The config checks and the lookup itself,
without services: tests/unit/test_enrichment.py.
"""
from __future__ import annotations

import json
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from etl import cli
from etl.config import load_config
from etl.errors import DimensionChanged
from etl.ops.run import run_job
from etl.model.batch import BatchState
from etl.state.store import ZkStateStore
from tests.harness.etl_process import run_etl
from tests.harness.state import wait_for_lock_release
from tests.harness.enrichment import countries_csv, enriched_schema


DB = "etl_test"


def countries_parquet(tmp_path: Path, names: dict[str, str]) -> Path:
    path = tmp_path / "countries.parquet"
    pq.write_table(pa.table({"code": list(names), "country_name": list(names.values())}), path)
    return path


def countries_section(source: Path, **overrides) -> dict:
    return {"source": f"file://{source}", "join_key": "country_code", "dimension_key": "code",
            "columns": "country_name", **overrides}


def event(i: int, country: str | None, user: str) -> bytes:
    return json.dumps({"event_id": i, "user_id": user, "country_code": country}).encode()


# -- on the real services ------------------------------------------------------------------------
@pytest.fixture
def hive_dimension(spark, tmp_path):
    """A Hive table users(user_id, user_tier), an external Parquet table in the test's folder."""
    name = f"{DB}.users_{uuid.uuid4().hex[:8]}"
    folder = tmp_path / "users_dim"
    folder.mkdir()
    pq.write_table(pa.table({"user_id": ["u0", "u1", "u2"], "user_tier": ["gold", "silver", "bronze"]}),
                   folder / "part-0.parquet")
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {DB}")
    spark.sql(f"CREATE EXTERNAL TABLE {name} (user_id string, user_tier string) STORED AS PARQUET "
              f"LOCATION 'file://{folder}'")
    yield name
    spark.sql(f"DROP TABLE IF EXISTS {name}")


def test_events_are_enriched_from_a_file_and_a_hive_table_unmatched_null_and_counted(
        spark, new_topic, produce, write_config, hive_table_name, hive_dimension, tmp_path, capsys):
    topic = new_topic(partitions=2)
    codes, users = ["DE", "FR", "XX", None], ["u0", "u1", "u2", "u3"]
    values = {p: [event(p * 100 + i, codes[i % 4], users[(i + p) % 4]) for i in range(6)] for p in range(2)}
    produce(topic, values)
    config = write_config(kafka={"topics": topic}, hive={"schema": str(enriched_schema(tmp_path))},
                          **{"dimension countries": countries_section(countries_csv(tmp_path)),
                             "dimension users": {"source": f"hive:{hive_dimension}", "join_key": "user_id",
                                                 "columns": "user_tier"}})
    capsys.readouterr()
    assert cli.main(["run", "--config", str(config)]) == 0
    summary = capsys.readouterr().out
    assert "unmatched in countries: 4, unmatched in users: 2" in summary  # XX and NULL twice; u3 twice

    rows = spark.sql(f"SELECT event_id, country_code, country_name, user_id, user_tier "
                     f"FROM {DB}.{hive_table_name}").collect()
    names, tiers = {"DE": "Germany", "FR": "France"}, {"u0": "gold", "u1": "silver", "u2": "bronze"}
    assert len(rows) == 12
    for row in rows:
        assert row.country_name == names.get(row.country_code), row
        assert row.user_tier == tiers.get(row.user_id), row

    assert cli.main(["status", "--config", str(config)]) == 0
    assert "rows whose key found no match (columns left NULL): countries 4, users 2" in capsys.readouterr().out
    pins = last_batch(config).dimensions
    assert pins["countries"]["location"].endswith("countries.csv")
    assert pins["users"]["location"].endswith("users_dim") and len(pins["users"]["files"]) == 1


def last_batch(config):
    loaded = load_config(config)
    with ZkStateStore(loaded.zookeeper, loaded.job.name, loaded.retry) as store:
        return store.batches.last_batch()[0]


def committed(config):
    loaded = load_config(config)
    with ZkStateStore(loaded.zookeeper, loaded.job.name, loaded.retry) as store:
        return store.offsets.committed_offsets()


@pytest.mark.slow
def test_a_dimension_changed_between_a_kill_and_the_resume_fails_or_is_used_as_configured(
        spark, zk, new_topic, produce, write_config, hive_table_name, warehouse_dir, tmp_path):
    topic = new_topic(partitions=2)
    produce(topic, {p: [event(p * 10 + i, "DE", "u0") for i in range(5)] for p in range(2)})
    source = countries_parquet(tmp_path, {"DE": "Germany", "FR": "France"})
    sections = {"kafka": {"topics": topic}, "hive": {"schema": str(enriched_schema(tmp_path))},
                "zookeeper": {"session_timeout_seconds": "4"},
                "dimension countries": countries_section(source)}
    config = write_config(**sections)
    killed = run_etl(config, fault="state:PLANNED")
    assert killed.returncode == -9, killed.stderr[-2000:]
    pinned_size = source.stat().st_size
    countries_parquet(tmp_path, {"DE": "Deutschland", "FR": "Frankreich", "AT": "Oesterreich"})
    wait_for_lock_release(zk, config)

    with pytest.raises(DimensionChanged) as failed:
        run_job(load_config(config))
    message = str(failed.value)
    assert failed.value.exit_code == 1
    assert f"dimension 'countries': pinned {source} (size {pinned_size}, modified" in message
    assert f"now {source} (size {source.stat().st_size}, modified" in message
    assert "on_dimension_change = use_current" in message and "nothing was committed" in message
    assert last_batch(config).state is BatchState.PLANNED and committed(config) == {}
    assert not list((warehouse_dir / f"{DB}.db" / hive_table_name).rglob("*.parquet"))

    use_current = write_config(**{**sections, "job": {"on_dimension_change": "use_current"}})
    assert run_job(load_config(use_current)) == 0
    names = {r.country_name for r in spark.sql(f"SELECT country_name FROM {DB}.{hive_table_name}").collect()}
    assert names == {"Deutschland"}
    batch = last_batch(use_current)
    assert batch.state is BatchState.COMMITTED and len(batch.dimension_changes) == 1
    change = batch.dimension_changes[0]
    assert change.dimension == "countries" and change.pinned["files"][0][1] == pinned_size
    assert change.current["files"][0][1] == source.stat().st_size
    assert batch.dimensions["countries"] == change.current
