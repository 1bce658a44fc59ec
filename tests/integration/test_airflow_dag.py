"""The two DAGs of deploy/airflow/etl_kafka_to_hive.py (BashOperator, SparkSubmitOperator) under
real Airflow (`airflow dags test`, SQLite) against the local stack: spark-submit loads the topic
exactly once and the closed hour's `_SUCCESS` sensor succeeds, which is an event of the table's
Asset; with the job's lock held by another run, the load is skipped, not failed. A run without a
logical date (as the API and asset triggers start them; through Airflow's DAG.test) senses the
hour before its run_after. Only exit 75 is retried: a run that exits 1 or 2 fails at its first try.

Airflow lives in its own venv (.airflow-venv, installed by scripts/airflow-venv, which scripts/test
runs); this test is skipped only when it is missing. Event times are on a past day, so the hour
before the DAG run's logical date has closed and the run itself writes its marker.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from etl.config import load_config
from etl.sink.markers import MARKER_NAME
from etl.state.store import ZkStateStore
from tests.harness import side_venvs
from tests.harness.cluster_submit import SPARK_HOME, check_archive_imports, probe_dir, read_probes
from tests.harness.oracle import check_exactly_once, expected_offsets, hive_reader
from tests.harness.paths import REPO
from tests.integration.test_yarn import SMALL

AIRFLOW = REPO / ".airflow-venv" / "bin" / "airflow"
DAGS = ("etl_kafka_to_hive", "etl_kafka_to_hive_spark_submit")  # BashOperator, SparkSubmitOperator
DB = "etl_test"
DAY = "2026-11-20"
LOGICAL_DATE = f"{DAY}T11:10:00+00:00"  # waits for hour 10's marker

# Requested by getfixturevalue below, per case: tests/conftest.py runs this module with the cluster tests.
DYNAMIC_FIXTURES = ("spark_standalone", "yarn")
WAITS_FOR_VENV = "airflow"  # last of its cluster group: scripts/test builds .airflow-venv meanwhile

# DAG.test() without a logical date, as a run triggered through the API or by an asset has none.
# argv: dag_id, run_after, retries of etl_run. Retries come at once (the DAG's five minutes apart
# are no part of the rule under test), and the sensor pokes once: the run writes the marker
# before it ends, so a sensor that does not find it at once has the wrong hour.
WITHOUT_LOGICAL_DATE = """
import datetime, sys
from airflow.dag_processing.dagbag import DagBag

dag_id, run_after, retries = sys.argv[1], datetime.datetime.fromisoformat(sys.argv[2]), int(sys.argv[3])
bag = DagBag()
assert not bag.import_errors, bag.import_errors
dag = bag.dags[dag_id]
for task in dag.tasks:
    task.retries, task.retry_delay = 0, datetime.timedelta(0)
dag.task_dict["etl_run"].retries = retries
dag.task_dict["closed_hour_success_marker"].timeout = 0
run = dag.test(logical_date=None, run_after=run_after)
print("RUN", run.run_id, "logical_date", run.logical_date)
"""

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not AIRFLOW.exists() and not side_venvs.being_built("airflow"),
                                 reason="Airflow is not installed: run scripts/airflow-venv")]


def at(hhmm: str, event_id: int) -> bytes:
    return json.dumps({"event_id": event_id, "ts": f"{DAY} {hhmm}:00"}).encode()


def airflow_env(home: Path, config: Path, table_path: Path) -> dict[str, str]:
    bin_dir = Path(sys.executable).parent
    return {**os.environ,
            "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "deploy" / "airflow"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "false",
            "AIRFLOW_VAR_ETL_CONFIG": str(config), "AIRFLOW_VAR_ETL_PYTHON": sys.executable,
            "AIRFLOW_VAR_ETL_TABLE": f"{DB}.{table_path.name}",
            "AIRFLOW_VAR_ETL_SPARK_SUBMIT": str(bin_dir / "spark-submit"),
            "AIRFLOW_VAR_ETL_SPARK_ARGS": "--master local[2]", "AIRFLOW_VAR_ETL_TABLE_PATH": str(table_path),
            "AIRFLOW_VAR_ETL_APPLICATION": str(REPO / "etl" / "__main__.py"),
            # SparkSubmitOperator's connection: the master, and spark-submit found on the PATH
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "AIRFLOW_CONN_FS_DEFAULT": json.dumps({"conn_type": "fs", "extra": {"path": "/"}})}


@pytest.fixture(scope="module")
def migrated_db(tmp_path_factory) -> Path:
    """An Airflow metadata DB migrated once for the module (`airflow db migrate` takes about 10 s
    here); each DAG run starts from a copy of it in an Airflow home of its own."""
    side_venvs.wait_for("airflow", AIRFLOW.parents[1])  # scripts/test builds it while the suite starts
    home = tmp_path_factory.mktemp("airflow-migrated")
    env = {**os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "false"}
    done = subprocess.run([str(AIRFLOW), "db", "migrate"], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    return home / "airflow.db"


def dags_test(dag_id: str, home: Path, env: dict[str, str], migrated_db: Path, *, run_after: str | None = None,
              retries: int = 0) -> tuple[str, dict[str, str], str]:
    """Run the DAG once in a fresh Airflow home with a copy of the migrated DB: (the run's final
    state, task -> state, output). With run_after, through DAG.test() without a logical date; else
    `airflow dags test` on LOGICAL_DATE."""
    home.mkdir()
    shutil.copyfile(migrated_db, home / "airflow.db")
    run = ([str(AIRFLOW.with_name("python")), "-c", WITHOUT_LOGICAL_DATE, dag_id, run_after, str(retries)]
           if run_after else [str(AIRFLOW), "dags", "test", dag_id, LOGICAL_DATE])
    done = subprocess.run(run, env=env, capture_output=True, text=True, timeout=900)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    with sqlite3.connect(home / "airflow.db") as db:
        [(state, logical_date)] = db.execute("SELECT state, logical_date FROM dag_run WHERE dag_id = ?",
                                             (dag_id,)).fetchall()
        tasks = dict(db.execute("SELECT task_id, state FROM task_instance WHERE dag_id = ?", (dag_id,)).fetchall())
    assert (logical_date is None) == (run_after is not None), logical_date
    return state, tasks, output


def tries(home: Path, task_id: str) -> int:
    """How many times the task ran in the Airflow home's one DAG run."""
    with sqlite3.connect(home / "airflow.db") as db:
        [(try_number,)] = db.execute("SELECT try_number FROM task_instance WHERE task_id = ?", (task_id,)).fetchall()
    return try_number


def table_events(home: Path) -> list[tuple[str, str, dict]]:
    """The asset events in the Airflow home: (the asset's name, its URI, the event's extra)."""
    with sqlite3.connect(home / "airflow.db") as db:
        rows = db.execute("SELECT asset.name, asset.uri, asset_event.extra FROM asset_event "
                          "JOIN asset ON asset.id = asset_event.asset_id").fetchall()
    return [(name, uri, json.loads(extra)) for name, uri, extra in rows]


def on_spark_standalone(request, env: dict[str, str], tmp_path: Path):
    """The BashOperator DAG's Variables for the session's Spark standalone cluster, as on an edge
    node: etl_python the packed environment unpacked, and etl_spark_args the --master, the archive
    and the executors' ./environment/bin/python (spark.pyspark.python; the driver keeps
    etl_python). The probe of tests/harness/cluster_submit.py records the executors' Python
    processes. Returns the cluster, its app ids before the run and the probe's folder."""
    cluster = request.getfixturevalue("spark_standalone")
    archive, edge_python = request.getfixturevalue("packed_env"), request.getfixturevalue("edge_node_python")
    probes = probe_dir(tmp_path)
    env.update(AIRFLOW_VAR_ETL_PYTHON=str(edge_python),
               AIRFLOW_VAR_ETL_SPARK_SUBMIT=str(SPARK_HOME / "bin" / "spark-submit"),
               AIRFLOW_VAR_ETL_SPARK_ARGS=(f"--master {cluster.url} --archives {archive}#environment "
                                           f"--conf spark.pyspark.python=./environment/bin/python "
                                           f"--conf spark.pyspark.driver.python={edge_python} "
                                           f"--conf spark.executorEnv.PYTHONPATH={probes}"),
               SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1")
    master = cluster.master_json()
    return cluster, {app["id"] for app in master["activeapps"] + master["completedapps"]}, probes


def check_ran_on_spark_standalone(cluster, before: set[str], probes: Path) -> str:
    """The run was one new application of the standalone Master, with executors on both Workers,
    and its Python tasks ran the archive's python in those executors' folders."""
    master = cluster.master_json()
    [app_id] = {app["id"] for app in master["activeapps"] + master["completedapps"]} - before
    try:
        dirs = cluster.executor_dirs(app_id)
        assert all(dirs.values()), dirs  # an executor on each Worker
        executors = [p for p in read_probes(probes) if p["cwd"].startswith(f"{cluster.workdir}/")]
        check_archive_imports(executors)
        assert {p["cwd"] for p in executors} <= {str(d) for found in dirs.values() for d in found}, executors
    finally:
        cluster.remove_app(app_id)
    return f"{app_id}: executors {dirs}"


def on_yarn_client_mode(request, env: dict[str, str], tmp_path: Path):
    """The SparkSubmitOperator DAG on the session's YARN in client mode, as on an edge node: the
    connection spark_default says `yarn` and deploy-mode client; the operator has no place for
    more spark-submit arguments, so the archive, the executors' ./environment/bin/python and the
    small containers come from a spark-defaults.conf in SPARK_CONF_DIR, and the YARN's address from
    HADOOP_CONF_DIR, both in the environment that the hook hands to spark-submit. The driver's
    python is named there too (spark.pyspark.driver.python): else the driver would take
    spark.pyspark.python before the PYSPARK_DRIVER_PYTHON that the DAG sets from etl_python.
    Not cluster mode: there a skipped run (the lock held) is a FAILED application and
    spark-submit exits 1 (docs/cluster.md, "Exit codes in cluster mode"). Returns the YARN, the
    application's tag (spark.yarn.tags) and the probe's folder."""
    cluster = request.getfixturevalue("yarn")
    archive, edge_python = request.getfixturevalue("yarn_archive"), request.getfixturevalue("edge_node_python")
    probes, tag = probe_dir(tmp_path), uuid.uuid4().hex[:12]
    [application] = edge_python.parent.parent.glob("lib/python3.*/site-packages/etl/__main__.py")
    conf_dir = tmp_path / "spark-conf"
    conf_dir.mkdir()
    settings = [*SMALL, f"spark.yarn.dist.archives={archive}#environment",
                "spark.pyspark.python=./environment/bin/python", f"spark.pyspark.driver.python={edge_python}",
                f"spark.executorEnv.PYTHONPATH={probes}", f"spark.yarn.tags={tag}", "spark.yarn.maxAppAttempts=1"]
    (conf_dir / "spark-defaults.conf").write_text("".join(f"{key} {value}\n" for key, _, value in
                                                          (setting.partition("=") for setting in settings)))
    env.update(AIRFLOW_VAR_ETL_PYTHON=str(edge_python), AIRFLOW_VAR_ETL_APPLICATION=str(application),
               AIRFLOW_CONN_SPARK_DEFAULT=json.dumps({"conn_type": "spark", "host": "yarn",
                                                      "extra": {"deploy-mode": "client"}}),
               HADOOP_CONF_DIR=str(cluster.conf_dir), SPARK_CONF_DIR=str(conf_dir), SPARK_HOME=str(SPARK_HOME),
               SPARK_LOCAL_IP="127.0.0.1")
    return cluster, tag, probes


def check_ran_on_yarn(cluster, tag: str, probes: Path) -> str:
    """The run was one new application of the ResourceManager, FINISHED and SUCCEEDED, and its
    Python tasks ran the archive's python in that application's containers."""
    [app] = [a for a in cluster.apps() if tag in a.get("applicationTags", "").split(",")]
    app_id = app["id"]
    assert re.fullmatch(r"application_\d+_\d+", app_id), app_id
    assert (app["state"], app["finalStatus"]) == ("FINISHED", "SUCCEEDED"), app
    containers = rf"{re.escape(str(cluster.nm_dir))}/local/usercache/[^/]+/appcache/{app_id}/" \
                 rf"{app_id.replace('application', 'container')}_\d+_\d+"
    executors = [p for p in read_probes(probes) if re.fullmatch(containers, p["cwd"])]
    assert executors, read_probes(probes)
    for probe in executors:  # YARN localizes pyspark.zip into the container too, unlike a standalone Worker
        here = probe["cwd"]
        assert probe["executable"] == f"{here}/environment/bin/python", probe
        assert probe["etl"] == f"{here}/environment/lib/python3.11/site-packages/etl/__init__.py", probe
        assert probe["pyspark"] == f"{here}/pyspark.zip/pyspark/__init__.py", probe
        assert not [entry for entry in probe["path"] if entry.startswith(str(REPO) + "/")
                    and not entry.startswith(str(SPARK_HOME))], probe  # nothing from the repository
    assert all(Path(p["cwd"]).name != f"{app_id.replace('application', 'container')}_01_000001"
               for p in executors), executors  # not the ApplicationMaster's container: client mode
    return (f"{app_id} {app['state']}/{app['finalStatus']}: executors' Python in "
            f"{sorted({Path(p['cwd']).name for p in executors})}")


# The BashOperator DAG (the one we recommend) loads on the session's Spark standalone cluster, the
# SparkSubmitOperator DAG on the session's YARN in client mode, as in production.
@pytest.mark.parametrize("dag_id", DAGS)
def test_the_dag_loads_exactly_once_then_senses_the_closed_hours_marker_and_skips_when_the_lock_is_held(
        request, dag_id, spark, tmp_path, new_topic, produce, write_config, hive_table_name, warehouse_dir,
        migrated_db):
    topic = new_topic(partitions=1)
    produce(topic, {0: [at("10:05", 1), at("10:40", 2), at("12:10", 3)]})  # watermark 12:10: hour 10 closed
    config = write_config(kafka={"topics": topic}, job={"max_rejected_ratio": "1"},
                          hive={"partition_by": "column:ts", "success_markers": "true",
                                "success_marker_delay_seconds": "0"})
    table_path = warehouse_dir / f"{DB}.db" / hive_table_name
    env = airflow_env(tmp_path / "airflow", config, table_path)
    standalone = on_spark_standalone(request, env, tmp_path) if dag_id == "etl_kafka_to_hive" else None
    yarn = on_yarn_client_mode(request, env, tmp_path) if dag_id == "etl_kafka_to_hive_spark_submit" else None

    started = time.monotonic()
    state, tasks, output = dags_test(dag_id, tmp_path / "airflow", env, migrated_db)
    print(f"DAG run final state: {state}; tasks: {tasks}; {time.monotonic() - started:.0f}s")
    print("\n".join(line for line in output.splitlines() if "DagRun Finished" in line))
    assert (state, tasks) == ("success", {"etl_run": "success", "closed_hour_success_marker": "success"}), \
        output[-6000:]
    if standalone:
        print(f"[standalone] {check_ran_on_spark_standalone(*standalone)}")
    if yarn:
        print(f"[yarn] {check_ran_on_yarn(*yarn)}")
    assert (table_path / f"dt={DAY}" / "hour=10" / MARKER_NAME).exists()
    marker = f"{table_path}/dt={DAY}/hour=10/{MARKER_NAME}"
    assert table_events(tmp_path / "airflow") == [
        (f"{DB}.{hive_table_name}", f"hive://{DB}/{hive_table_name}",
         {"partition": f"dt={DAY}/hour=10", "marker": marker})]
    check_exactly_once(hive_reader(spark), config, expected_offsets(topic, {0: 3}), warehouse_dir,
                       run_verify=False)

    cfg = load_config(config)
    with ZkStateStore(cfg.zookeeper, cfg.job.name, cfg.retry) as holder:
        assert holder.session.acquire_lock() is None
        home = tmp_path / "airflow-lock-held"
        started = time.monotonic()
        state, tasks, output = dags_test(dag_id, home, {**env, "AIRFLOW_HOME": str(home)}, migrated_db)
    print(f"DAG run with the lock held, final state: {state}; tasks: {tasks}; {time.monotonic() - started:.0f}s")
    assert (state, tasks) == ("success", {"etl_run": "skipped", "closed_hour_success_marker": "success"}), \
        output[-6000:]
    assert "is already running" in output


# The sensor is one function of the DAG file, shared by both DAGs: the recommended one is enough.
@pytest.mark.parametrize("dag_id", DAGS[:1])
def test_a_run_without_a_logical_date_senses_the_hour_before_it_was_due(
        dag_id, tmp_path, new_topic, produce, write_config, hive_table_name, warehouse_dir, migrated_db):
    topic = new_topic(partitions=1)
    produce(topic, {0: [at("10:05", 1), at("12:10", 2)]})  # watermark 12:10: hours 10 and 11 closed
    config = write_config(kafka={"topics": topic}, hive={"partition_by": "column:ts", "success_markers": "true",
                                                           "success_marker_delay_seconds": "0"})
    table_path = warehouse_dir / f"{DB}.db" / hive_table_name
    home = tmp_path / "airflow"

    state, tasks, output = dags_test(dag_id, home, airflow_env(home, config, table_path), migrated_db,
                                     run_after=f"{DAY}T11:10:00+00:00")
    print(f"DAG run without a logical date, final state: {state}; tasks: {tasks}")
    assert (state, tasks) == ("success", {"etl_run": "success", "closed_hour_success_marker": "success"}), \
        output[-6000:]
    assert [extra["partition"] for _, _, extra in table_events(home)] == [f"dt={DAY}/hour=10"]


# Exit 2: no such config file; 1: a topic that does not exist; 75: ZooKeeper does not answer
# (port 9, discard: nothing listens). That 75 comes before any JVM: each try of etl_run exits in
# about 2 s, where a metastore that does not answer (also 75: test_crash.py) takes about 10 s.
FAILURES = {2: lambda write_config, topic: Path("/nonexistent/etl.ini"),
            1: lambda write_config, topic: write_config(kafka={"topics": "no-such-topic-here"}),
            75: lambda write_config, topic: write_config(kafka={"topics": topic},
                                                         zookeeper={"hosts": "127.0.0.1:9",
                                                                    "session_timeout_seconds": "1"})}


# Exit 75 is retried through each operator's own failure path; one other exit per DAG shows that
# only 75 is (each of 1 and 2 once: the rule is one list in the DAG file, shared by both DAGs).
RETRY_CASES = [("etl_kafka_to_hive", 75), ("etl_kafka_to_hive", 2),
               ("etl_kafka_to_hive_spark_submit", 75), ("etl_kafka_to_hive_spark_submit", 1)]


@pytest.mark.parametrize(("dag_id", "exit_code"), RETRY_CASES)
def test_etl_run_is_retried_on_exit_75_only(dag_id, exit_code, tmp_path, new_topic, write_config, hive_table_name,
                                             warehouse_dir, migrated_db):
    config = FAILURES[exit_code](write_config, new_topic(partitions=1))
    table_path = warehouse_dir / f"{DB}.db" / hive_table_name
    home = tmp_path / "airflow"

    state, tasks, output = dags_test(dag_id, home, airflow_env(home, config, table_path), migrated_db,
                                     run_after=f"{DAY}T11:10:00+00:00", retries=1)
    print(f"etl run exiting {exit_code}: final state {state}; tasks {tasks}; etl_run tried {tries(home, 'etl_run')}")
    assert (state, tasks) == ("failed", {"etl_run": "failed", "closed_hour_success_marker": "upstream_failed"}), \
        output[-6000:]
    assert tries(home, "etl_run") == (2 if exit_code == 75 else 1), output[-6000:]
    said = (f"exit code {exit_code}", f"Error code is: {exit_code}") if exit_code == 75 \
        else (f"etl run exited {exit_code}",)
    assert any(words in output for words in said), output[-6000:]
    assert table_events(home) == []
