"""The two DAGs of deploy/airflow/etl_kafka_to_hive.py (BashOperator, SparkSubmitOperator) under
real Airflow (`airflow dags test`, SQLite) against the local stack: spark-submit loads the topic
exactly once and the closed hour's `_SUCCESS` sensor succeeds; with the job's lock held by another run, the load is skipped, not failed.

Airflow lives in its own venv (.airflow-venv, installed by scripts/airflow-venv, which scripts/test
runs); this test is skipped only when it is missing. Event times are on a past day, so the hour
before the DAG run's logical date has closed and the run itself writes its marker.
"""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from etl.config import load_config
from etl.sink.markers import MARKER_NAME
from etl.state.store import ZkStateStore
from tests.harness.oracle import check_exactly_once, expected_offsets, hive_reader
from tests.harness.paths import REPO

AIRFLOW = REPO / ".airflow-venv" / "bin" / "airflow"
DAGS = ("etl_kafka_to_hive", "etl_kafka_to_hive_spark_submit")  # BashOperator, SparkSubmitOperator
DB = "etl_test"
DAY = "2026-11-20"
LOGICAL_DATE = f"{DAY}T11:10:00+00:00"  # waits for hour 10's marker

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not AIRFLOW.exists(), reason="Airflow is not installed: run scripts/airflow-venv")]


def at(hhmm: str, event_id: int) -> bytes:
    return json.dumps({"event_id": event_id, "ts": f"{DAY} {hhmm}:00"}).encode()


def airflow_env(home: Path, config: Path, table_path: Path) -> dict[str, str]:
    bin_dir = Path(sys.executable).parent
    return {**os.environ,
            "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "deploy" / "airflow"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "false",
            "AIRFLOW_VAR_ETL_CONFIG": str(config), "AIRFLOW_VAR_ETL_PYTHON": sys.executable,
            "AIRFLOW_VAR_ETL_SPARK_SUBMIT": str(bin_dir / "spark-submit"),
            "AIRFLOW_VAR_ETL_SPARK_ARGS": "--master local[2]", "AIRFLOW_VAR_ETL_TABLE_PATH": str(table_path),
            "AIRFLOW_VAR_ETL_APPLICATION": str(REPO / "etl" / "__main__.py"),
            # SparkSubmitOperator's connection: the master, and spark-submit found on the PATH
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "AIRFLOW_CONN_FS_DEFAULT": json.dumps({"conn_type": "fs", "extra": {"path": "/"}})}


def dags_test(dag_id: str, home: Path, env: dict[str, str]) -> tuple[str, dict[str, str], str]:
    """Run the DAG once in a fresh Airflow home: (the run's final state, task -> state, output)."""
    home.mkdir()
    for command in (["db", "migrate"], ["dags", "test", dag_id, LOGICAL_DATE]):
        done = subprocess.run([str(AIRFLOW), *command], env=env, capture_output=True, text=True, timeout=900)
        output = done.stdout + done.stderr
        assert done.returncode == 0, output[-6000:]
    with sqlite3.connect(home / "airflow.db") as db:
        [(state,)] = db.execute("SELECT state FROM dag_run WHERE dag_id = ?", (dag_id,)).fetchall()
        tasks = dict(db.execute("SELECT task_id, state FROM task_instance WHERE dag_id = ?", (dag_id,)).fetchall())
    return state, tasks, output


@pytest.mark.parametrize("dag_id", DAGS)
def test_the_dag_loads_exactly_once_then_senses_the_closed_hours_marker_and_skips_when_the_lock_is_held(
        dag_id, spark, tmp_path, new_topic, produce, write_config, hive_table_name, warehouse_dir):
    topic = new_topic(partitions=1)
    produce(topic, {0: [at("10:05", 1), at("10:40", 2), at("12:10", 3)]})  # watermark 12:10: hour 10 closed
    config = write_config(kafka={"topics": topic}, job={"max_rejected_ratio": "1"},
                          hive={"partition_by": "column:ts", "success_markers": "true",
                                "success_marker_delay_seconds": "0"})
    table_path = warehouse_dir / f"{DB}.db" / hive_table_name
    env = airflow_env(tmp_path / "airflow", config, table_path)

    state, tasks, output = dags_test(dag_id, tmp_path / "airflow", env)
    print(f"DAG run final state: {state}; tasks: {tasks}")
    print("\n".join(line for line in output.splitlines() if "DagRun Finished" in line))
    assert (state, tasks) == ("success", {"etl_run": "success", "closed_hour_success_marker": "success"}), \
        output[-6000:]
    assert (table_path / f"dt={DAY}" / "hour=10" / MARKER_NAME).exists()
    check_exactly_once(hive_reader(spark), config, expected_offsets(topic, {0: 3}), warehouse_dir,
                       run_verify=False)

    cfg = load_config(config)
    with ZkStateStore(cfg.zookeeper, cfg.job.name, cfg.retry) as holder:
        assert holder.acquire_lock() is None
        home = tmp_path / "airflow-lock-held"
        state, tasks, output = dags_test(dag_id, home, {**env, "AIRFLOW_HOME": str(home)})
    print(f"DAG run with the lock held, final state: {state}; tasks: {tasks}")
    assert (state, tasks) == ("success", {"etl_run": "skipped", "closed_hour_success_marker": "success"}), \
        output[-6000:]
    assert "is already running" in output
