"""What an operator sees, counted in real processes: `etl run` against a ZooKeeper that does not
answer says so in at most 3 lines, and `spark-submit` of a batch prints no INFO line of Spark's,
only the job's own lines (which -q hides) and its progress while the tasks run, and no warning
of librdkafka's about a [kafka] key that only its consumers use."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest

from etl.hive.spark import DRIVER_LOG4J2
from tests.harness.data import events_by_partition
from tests.harness.paths import EVENTS_SCHEMA, REPO
from tests.harness.ports import free_port

SPARK_SUBMIT = Path(pyspark.__file__).parent / "bin" / "spark-submit"
JOB_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (INFO|WARNING|ERROR) etl[.\w]*: ")
INFO = re.compile(r"\bINFO\b|\"level\": \"INFO\"")
PROGRESS = re.compile(r" INFO etl\.job\.progress: batch 1 tasks: [0-4]/4 ranges done, [\d,]+ rows, [\d,]+ rows/s$")


def _unreachable_zookeeper_ini(tmp_path: Path) -> Path:
    path = tmp_path / "etl.ini"
    path.write_text(f"""[job]
name = quiet
[kafka]
bootstrap.servers = 127.0.0.1:{free_port()}
topics = a
[zookeeper]
hosts = 127.0.0.1:{free_port()}
session_timeout_seconds = 2
[warehouse]
url = file://{tmp_path / "warehouse"}
[hive]
database = db
table = t
schema = {EVENTS_SCHEMA}
""")
    return path


def _etl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "etl", *args], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, env={k: v for k, v in os.environ.items() if k != "ETL_LOG_FORMAT"})


def test_an_unreachable_zookeeper_takes_at_most_three_lines(tmp_path):
    config = _unreachable_zookeeper_ini(tmp_path)
    result = _etl("run", "--config", str(config))
    lines = (result.stdout + result.stderr).splitlines()
    assert result.returncode != 0 and len(lines) <= 3, lines
    assert any("cannot connect to ZooKeeper" in line for line in lines), lines
    # The count sees kazoo's lines when they are shown (-v): its connection attempts, two lines each.
    verbose = _etl("-v", "run", "--config", str(config))
    assert len(re.findall(r"INFO kazoo\.client: Connecting to", verbose.stderr)) >= 2, verbose.stderr


@pytest.mark.slow
def test_spark_submit_of_a_batch_prints_no_info_line_of_spark(new_topic, produce, write_config, tmp_path):
    topic = new_topic(partitions=4)
    produce(topic, events_by_partition(4, 250))
    # a consumer-only key: the driver's admin client must not warn of it (CONFWARN) at every run
    config = write_config(kafka={"topics": topic, "max.partition.fetch.bytes": "2097152"},
                          job={"progress_seconds": "0.5"})
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           # partition 0's task holds on 2 s after its file: the batch's tasks last more than one progress interval
           "ETL_FAULT_POINT": "renamed:0", "ETL_FAULT_ACTION": "sleep:2"}
    env.pop("ETL_LOG_FORMAT", None)
    command = [str(SPARK_SUBMIT), "--master", "local[2]",
               "--driver-java-options", f"-Dlog4j2.configurationFile={DRIVER_LOG4J2}",
               str(REPO / "scripts" / "run_etl.py"), "--config", str(config)]
    result = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    assert "etl: batch 1 (new) COMMITTED: 4 files, 1000 rows, 0 rejected" in result.stdout, output
    print(f"[quiet] spark-submit: {len(result.stderr.splitlines())} stderr lines, "
          f"{len(result.stdout.splitlines())} stdout lines")
    assert not [line for line in result.stderr.splitlines() if INFO.search(line)], result.stderr
    # The job's own INFO lines (its Python stderr reaches spark-submit's stdout): the plan, the
    # progress and the summary, all in the job's format; nothing else says INFO.
    others = [line for line in output.splitlines() if INFO.search(line) and not JOB_LINE.match(line)]
    assert others == [], output
    assert "CONFWARN" not in output, output
    assert any(PROGRESS.search(line) for line in result.stdout.splitlines()), result.stdout
