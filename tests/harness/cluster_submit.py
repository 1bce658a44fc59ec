"""The cluster recipe of docs/cluster.md, for the cluster tests: the packed environment of
scripts/pack-env, unpacked as on an edge node, `spark-submit --archives ENV.tar.gz#environment` in
client mode with nothing of this repository on any PYTHONPATH, and a probe that records where
every Python process of the job ran and imported `etl` from.

The driver runs the archive's python, unpacked (an edge node without the project installed);
the executors run ./environment/bin/python. Neither has pyspark in the archive: spark-submit
puts $SPARK_HOME/python/lib/pyspark.zip on their PYTHONPATH, as a cluster's Spark does. The
probe is a sitecustomize.py on the PYTHONPATH: every Python process that starts writes which
interpreter it is, its working folder and where `etl` and `pyspark` come from.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pyspark

from etl.hive.spark import DRIVER_LOG4J2
from tests.harness.paths import REPO

ARCHIVE = REPO / "build" / "kafka-hive-etl-env.tar.gz"  # scripts/pack-env's default output
SPARK_HOME = Path(pyspark.__file__).parent  # the pip wheel is a whole Spark distribution
PROBE = '''
# tests/harness/cluster_submit.py: which interpreter this Python process is, and where it imports etl from.
import importlib.util, json, os, sys
def _origin(name):
    spec = importlib.util.find_spec(name)
    return spec.origin if spec else None
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), f"python-{os.getpid()}.json"), "w") as _f:
    json.dump({"executable": sys.executable, "cwd": os.getcwd(), "etl": _origin("etl"),
               "pyspark": _origin("pyspark"), "path": sys.path}, _f)
'''


def pack_env() -> Path:
    """The archive; scripts/pack-env skips the build when the archive in build/ was made from
    the same project files, so a second session reuses it."""
    started = time.monotonic()
    result = subprocess.run([sys.executable, str(REPO / "scripts" / "pack_env.py"), "--output", str(ARCHIVE)],
                            capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout + result.stderr[-5000:]
    print(f"[cluster] {result.stdout.strip().splitlines()[-1]} (pack {time.monotonic() - started:.0f}s)")
    return ARCHIVE


def unpack(archive: Path, folder: Path) -> Path:
    """The archive unpacked into folder/environment, as on an edge node: its python."""
    environment = folder / "environment"
    with tarfile.open(archive) as tar:
        tar.extractall(environment, filter="tar")
    return environment / "bin" / "python"


def probe_dir(parent: Path) -> Path:
    """A folder holding the probe's sitecustomize.py; the probe writes its records there."""
    folder = parent / "probe"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(PROBE)
    return folder


def read_probes(folder: Path) -> list[dict]:
    return [json.loads(path.read_text()) for path in sorted(folder.glob("python-*.json"))]


def submit_env(driver_python: Path, probes: Path) -> dict[str, str]:
    """spark-submit's environment: the edge node's python for the driver, the archive's for the
    executors, the probe on the PYTHONPATH, every address on 127.0.0.1 (else Spark binds the
    driver to the machine's first non-loopback address)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "ETL_FAULT_"))
           and k not in ("PYTHONPATH", "VIRTUAL_ENV", "SPARK_HOME", "SPARK_CONF_DIR")}
    env.update(SPARK_HOME=str(SPARK_HOME), PYSPARK_DRIVER_PYTHON=str(driver_python),
               PYSPARK_PYTHON="./environment/bin/python", PYTHONPATH=str(probes), SPARK_LOCAL_IP="127.0.0.1")
    return env


def submit_command(master: str, config: Path, archive: Path, driver_python: Path, probes: Path,
                   *conf: str) -> list[str]:
    """The client-mode spark-submit line of docs/cluster.md; `conf`: extra --conf KEY=VALUE."""
    # The driver JVM logs warnings and errors only, with the config the archive's etl package carries.
    log4j2 = driver_python.parent.parent / "lib" / "python3.11" / "site-packages" / "etl" / "hive" / DRIVER_LOG4J2.name
    assert log4j2.is_file(), f"{log4j2}: the packed etl package lacks its log4j2 config"
    extra = [arg for setting in conf for arg in ("--conf", setting)]
    return [str(SPARK_HOME / "bin" / "spark-submit"), "--master", master,
            "--driver-java-options", f"-Dlog4j2.configurationFile={log4j2}",
            "--archives", f"{archive}#environment",
            "--conf", f"spark.executorEnv.PYTHONPATH={probes}", *extra,
            str(REPO / "scripts" / "run_etl.py"), "--config", str(config)]


def check_executors_loaded_the_archive(probes: list[dict], driver_python: Path, work_root: Path) -> list[dict]:
    """Every Python process was the edge node's driver or an executor's ./environment/bin/python
    under `work_root`, and each imported etl from its archive, never from this repository.
    Returns the executors' probes."""
    edge_node = driver_python.parent.parent
    drivers = [p for p in probes if p["executable"] == str(driver_python)]
    executors = [p for p in probes if p["executable"].startswith(f"{work_root}/")]
    assert drivers and executors and len(drivers) + len(executors) == len(probes), probes
    assert all(p["etl"] == f"{edge_node}/lib/python3.11/site-packages/etl/__init__.py" for p in drivers), drivers
    check_archive_imports(executors)
    return executors


def check_archive_imports(executors: list[dict]) -> None:
    """Each executor's Python process ran ./environment/bin/python of its own folder and imported
    etl from there, pyspark from Spark's pyspark.zip, nothing from this repository."""
    assert executors
    for probe in executors:
        environment = Path(probe["cwd"]) / "environment"
        assert probe["executable"] == f"{environment}/bin/python", probe
        assert probe["etl"] == f"{environment}/lib/python3.11/site-packages/etl/__init__.py", probe
        assert probe["pyspark"] == f"{SPARK_HOME}/python/lib/pyspark.zip/pyspark/__init__.py", probe
    assert not [entry for p in executors for entry in p["path"] if entry.startswith(str(REPO) + "/")
                and not entry.startswith(str(SPARK_HOME))], "an executor could import from the repository"
