"""The cluster recipe of docs/cluster.md, for the cluster tests: the packed environment of
scripts/pack-env, unpacked as on an edge node, `spark-submit --archives ENV.tar.gz#environment` in
client mode with nothing of this repository on any PYTHONPATH, and a probe that records where
every Python process of the job ran and imported `etl` from.

The driver runs the archive's python, unpacked (an edge node without the project installed);
the executors run ./environment/bin/python. Neither has pyspark in the archive: spark-submit
puts $SPARK_HOME/python/lib/pyspark.zip on their PYTHONPATH, as a cluster's Spark does. The
probe is a sitecustomize.py on the PYTHONPATH: every Python process that starts writes which
interpreter it is, its working folder and where `etl` and `pyspark` come from.

`spark_submit` is the one builder of spark-submit lines: the standalone and YARN tests and the
bench's cluster shape (tests/perf/cluster_shape.py) all take theirs from it.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Sequence

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


@dataclass(frozen=True)
class SparkSubmit:
    """One spark-submit of scripts/run_etl.py: its command line and the environment to run it in."""
    command: list[str]
    env: dict[str, str]


def spark_submit(master: str, config: Path, *, archive: Path | str | None, driver_python: Path | None = None,
                 deploy_mode: Literal["client", "cluster"] | None = None, probes: Path | None = None,
                 conf: Sequence[str] = (), files: Sequence[Path] = (), args: Sequence[str] = (),
                 hadoop_conf_dir: Path | None = None, quiet_driver: bool = True) -> SparkSubmit:
    """The spark-submit line of docs/cluster.md, the one builder of the cluster tests and the bench.

    `archive`: the packed environment, shipped with --archives (a local path, or the hdfs:// URI
    of a copy put there once); the executors (and in cluster mode the driver) run its
    ./environment/bin/python. None: a local run where the job is
    installed, everything on `driver_python`. Client mode (no `deploy_mode`, or "client"): the
    driver runs `driver_python` here, logging warnings and errors only with the log4j2 config
    of the etl package it imports (`quiet_driver`). Cluster mode: the driver runs in YARN's
    ApplicationMaster and reads the INI (and `files`) by bare name from its working folder.
    `probes`: the probe's folder, on every Python process's PYTHONPATH. `conf`: extra --conf
    KEY=VALUE; `args`: after --config. Every address is 127.0.0.1 (else Spark binds the driver
    to the machine's first non-loopback address), and nothing of this repository is on a path.
    """
    in_cluster = deploy_mode == "cluster"
    assert in_cluster or driver_python is not None, "client mode: the driver needs the edge node's python"
    python = "./environment/bin/python" if archive is not None else str(driver_python)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "ETL_FAULT_"))
           and k not in ("PYTHONPATH", "VIRTUAL_ENV", "SPARK_HOME", "SPARK_CONF_DIR")}
    env.update(SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1")
    if hadoop_conf_dir is not None:
        env["HADOOP_CONF_DIR"] = str(hadoop_conf_dir)
    command = [str(SPARK_HOME / "bin" / "spark-submit"), "--master", master]
    command += ["--deploy-mode", deploy_mode] if deploy_mode else []
    settings = [f"spark.executorEnv.PYTHONPATH={probes}"] if probes is not None else []
    if in_cluster:
        settings.append(f"spark.pyspark.python={python}")
        settings += [f"spark.yarn.appMasterEnv.PYTHONPATH={probes}"] if probes is not None else []
        command += ["--files", ",".join(str(f) for f in (config, *files))]
        config_arg = config.name  # the bare name: --files put it in the driver's working folder
    else:
        env.update(PYSPARK_DRIVER_PYTHON=str(driver_python), PYSPARK_PYTHON=python)
        env.update({"PYTHONPATH": str(probes)} if probes is not None else {})
        command += ["--driver-java-options", f"-Dlog4j2.configurationFile={driver_log4j2(driver_python)}"] \
            if quiet_driver else []
        config_arg = str(config)
    command += ["--archives", f"{archive}#environment"] if archive is not None else []
    command += [arg for setting in (*settings, *conf) for arg in ("--conf", setting)]
    command += [str(REPO / "scripts" / "run_etl.py"), "--config", config_arg, *args]
    return SparkSubmit(command, env)


def driver_log4j2(driver_python: Path) -> Path:
    """The driver JVM's log4j2 config that the etl package imported by `driver_python` carries."""
    found = sorted(driver_python.parent.parent.glob(f"lib/python3.*/site-packages/etl/hive/{DRIVER_LOG4J2.name}"))
    assert found, f"{driver_python}: its etl package lacks its log4j2 config {DRIVER_LOG4J2.name}"
    return found[0]


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
