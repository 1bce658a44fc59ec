"""The job on the Spark 3.5 line: pyspark 3.5.9 (its Hadoop client 3.3, Hive client 2.3.9,
Scala 2.12, Java options and class archive of its own), from .venv-spark35, which
scripts/spark35-venv installs from the line's lock and scripts/test runs. Every `etl` here is
that venv's, driver and Python workers; the rest of the suite runs the 4.x line from .venv.

On the shared stack (Kafka 4.4, the Hive 2.3 metastore): a first batch SIGKILLed
while a task writes; `etl recover` and the run after it, all on 3.5; the exactly-once oracle with the 3.5
line's `etl verify --deep`; and the analysts' read of the files 3.5 wrote, through the Spark
Thrift Server.
"""
from __future__ import annotations

import subprocess

import pytest

from tests.harness import side_venvs
from tests.harness.data import events_by_partition
from tests.harness.etl_process import run_etl
from tests.harness.jdbc import offsets_reader
from tests.harness.oracle import check_exactly_once, expected_offsets
from tests.harness.paths import REPO
from tests.harness.recovery import kill_mid_write

pytestmark = [pytest.mark.slow, pytest.mark.cell("spark-3.5")]
WAITS_FOR_VENV = "spark35"  # late in the suite (tests/conftest.py): scripts/test builds it meanwhile

SPARK_35 = REPO / ".venv-spark35"


@pytest.fixture(scope="module")
def spark_35_venv():
    python = side_venvs.wait_for("spark35", SPARK_35) / "bin" / "python"
    version = subprocess.run([str(python), "-c", "import pyspark; print(pyspark.__version__)"], check=True,
                             capture_output=True, text=True).stdout.strip()
    assert version.startswith("3.5."), version
    return SPARK_35


def test_a_batch_a_kill_mid_write_and_recovery_on_spark_3_5_land_every_offset_once(
        spark_35_venv, spark, zk, thrift_url, new_topic, produce, write_config, warehouse_dir):
    topic = new_topic(partitions=2)
    produce(topic, events_by_partition(2, 40))
    config = write_config(kafka={"topics": topic}, zookeeper={"session_timeout_seconds": "4"})
    kill_mid_write(config, topic, zk, venv=spark_35_venv)  # the first batch: recover and the rerun are the batches
    produce(topic, events_by_partition(2, 25, first_id=80))
    recovered = run_etl(config, "--execute", command="recover", venv=spark_35_venv)
    assert recovered.returncode == 0, recovered.describe()
    rerun = run_etl(config, "-v", venv=spark_35_venv)
    assert rerun.returncode == 0, rerun.describe()
    assert "SparkContext started (Spark 3.5." in rerun.stderr, rerun.describe()

    verified = run_etl(config, "--deep", command="verify", venv=spark_35_venv)
    assert verified.returncode == 0, verified.describe()
    report = check_exactly_once(offsets_reader(spark._jvm, thrift_url), config, expected_offsets(topic, {0: 65, 1: 65}),
                                warehouse_dir, run_verify=False)
    assert report.rows == 130, report.describe()
    print(f"[spark-3.5] {report.describe().replace('etl verify --deep: not run', 'etl verify --deep on 3.5: exit 0')}")
