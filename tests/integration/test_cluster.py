"""The cluster recipe of docs/cluster.md, run for real: `spark-submit --archives ENV.tar.gz#environment`
with the archive from scripts/pack-env, on a local-cluster master (a standalone master and two
workers, each executor a JVM of its own that unpacks the archive into its working folder).

Client mode, as on an edge node that does not have the project installed: the driver runs the
python of the same archive, unpacked, and the executors run ./environment/bin/python. Neither
has pyspark in the archive: spark-submit puts $SPARK_HOME/python/lib/pyspark.zip on their
PYTHONPATH, as a cluster's Spark does. A sitecustomize.py on the PYTHONPATH records, in every
Python process that starts, which interpreter it is and where `etl` and `pyspark` come from,
which proves the executors load the job from the archive and not from this repository.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pyspark
import pytest

from etl.hive.spark import DRIVER_LOG4J2
from tests.harness.data import events_by_partition
from tests.harness.oracle import expected_offsets, table_offsets
from tests.harness.paths import REPO

ARCHIVE = REPO / "build" / "kafka-hive-etl-env.tar.gz"  # scripts/pack-env's default output
SPARK_HOME = Path(pyspark.__file__).parent  # the pip wheel is a whole Spark distribution
PROBE = '''
# tests/integration/test_cluster.py: which interpreter this Python process is, and where it imports etl from.
import importlib.util, json, os, sys
def _origin(name):
    spec = importlib.util.find_spec(name)
    return spec.origin if spec else None
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), f"python-{os.getpid()}.json"), "w") as _f:
    json.dump({"executable": sys.executable, "cwd": os.getcwd(), "etl": _origin("etl"),
               "pyspark": _origin("pyspark"), "path": sys.path}, _f)
'''


@pytest.fixture(scope="session")
def packed_env() -> Path:
    """The archive, built once per session. scripts/pack-env skips the build when the archive
    in build/ was made from the same project files, so a second session reuses it."""
    started = time.monotonic()
    result = subprocess.run([sys.executable, str(REPO / "scripts" / "pack_env.py"), "--output", str(ARCHIVE)],
                            capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout + result.stderr[-5000:]
    print(f"[cluster] {result.stdout.strip().splitlines()[-1]} (fixture {time.monotonic() - started:.0f}s)")
    return ARCHIVE


@pytest.fixture(scope="session")
def edge_node_python(packed_env, tmp_path_factory) -> Path:
    """The archive unpacked, as on an edge node: the client-mode driver's python."""
    environment = tmp_path_factory.mktemp("edge-node") / "environment"
    with tarfile.open(packed_env) as tar:
        tar.extractall(environment, filter="tar")
    return environment / "bin" / "python"


@pytest.fixture
def spark_work_dir():
    """local-cluster workers always unpack into $SPARK_HOME/work/<app>/<executor> (they take
    no work dir setting), ~300 MB per executor here: remove the apps this test started."""
    work = SPARK_HOME / "work"
    before = set(work.iterdir()) if work.is_dir() else set()
    yield work
    for app in (set(work.iterdir()) if work.is_dir() else set()) - before:
        if any((executor / "environment").exists() for executor in app.iterdir()):
            shutil.rmtree(app)


def spark_submit(config: Path, archive: Path, driver_python: Path, probe_dir: Path, cwd: Path,
                 timeout: float = 900) -> subprocess.CompletedProcess:
    """The client-mode recipe of docs/cluster.md, with nothing of this repository on any PYTHONPATH."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PYSPARK_") and k not in ("PYTHONPATH", "VIRTUAL_ENV", "SPARK_HOME")}
    env.update(SPARK_HOME=str(SPARK_HOME), PYSPARK_DRIVER_PYTHON=str(driver_python),
               PYSPARK_PYTHON="./environment/bin/python", PYTHONPATH=str(probe_dir))
    # The driver JVM logs warnings and errors only, with the config the archive's etl package carries.
    log4j2 = driver_python.parent.parent / "lib" / "python3.11" / "site-packages" / "etl" / "hive" / DRIVER_LOG4J2.name
    assert log4j2.is_file(), f"{log4j2}: the packed etl package lacks its log4j2 config"
    command = [str(SPARK_HOME / "bin" / "spark-submit"), "--master", "local-cluster[2,1,1024]",
               "--driver-java-options", f"-Dlog4j2.configurationFile={log4j2}",
               "--archives", f"{archive}#environment",
               "--conf", f"spark.executorEnv.PYTHONPATH={probe_dir}",
               str(REPO / "scripts" / "run_etl.py"), "--config", str(config)]
    return subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          start_new_session=True)


def read_probes(probe_dir: Path) -> list[dict]:
    return [json.loads(path.read_text()) for path in sorted(probe_dir.glob("python-*.json"))]


@pytest.mark.slow
def test_spark_submit_with_the_packed_env_on_local_cluster_loads_exactly_once(
        packed_env, edge_node_python, spark_work_dir, spark, new_topic, produce, write_config, hive_table_name,
        tmp_path):
    topic = new_topic(partitions=4)
    counts = {p: 250 for p in range(4)}
    produce(topic, events_by_partition(4, 250))
    # The config keeps [spark] spark.master = local[2]: spark-submit's --master must win over it.
    config = write_config(kafka={"topics": topic})
    probe_dir = tmp_path / "probe"
    probe_dir.mkdir()
    (probe_dir / "sitecustomize.py").write_text(PROBE)
    cwd = tmp_path / "submit"
    cwd.mkdir()

    started = time.monotonic()
    result = spark_submit(config, packed_env, edge_node_python, probe_dir, cwd)
    seconds = time.monotonic() - started
    assert result.returncode == 0, result.stdout + result.stderr[-6000:]
    assert "batch 1 (new) COMMITTED: 4 files, 1000 rows, 0 rejected" in result.stdout, result.stdout

    edge_node = edge_node_python.parent.parent
    probes = read_probes(probe_dir)
    drivers = [p for p in probes if p["executable"] == str(edge_node_python)]
    executors = [p for p in probes if p["executable"].startswith(f"{spark_work_dir}/")]
    assert drivers and executors and len(drivers) + len(executors) == len(probes), probes
    assert all(p["etl"] == f"{edge_node}/lib/python3.11/site-packages/etl/__init__.py" for p in drivers), drivers
    executor_dirs = {Path(p["cwd"]) for p in executors}
    assert len(executor_dirs) == 2, executors  # both local-cluster executors ran Python tasks, not local[2]
    for probe in executors:
        environment = Path(probe["cwd"]) / "environment"
        assert probe["executable"] == f"{environment}/bin/python", probe
        assert probe["etl"] == f"{environment}/lib/python3.11/site-packages/etl/__init__.py", probe
        assert probe["pyspark"] == f"{SPARK_HOME}/python/lib/pyspark.zip/pyspark/__init__.py", probe
    assert not [entry for p in executors for entry in p["path"] if entry.startswith(str(REPO) + "/")
                and not entry.startswith(str(SPARK_HOME))], "an executor could import from the repository"

    assert table_offsets(spark, "etl_test", hive_table_name) == expected_offsets(topic, counts)
    assert table_offsets(spark, "etl_test", f"{hive_table_name}_rejected") == {}
    print(f"[cluster] spark-submit --archives on local-cluster[2,1,1024]: {seconds:.0f}s; executors ran "
          f"{executors[0]['executable']} and imported etl from the archive")
