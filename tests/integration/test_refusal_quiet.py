"""A refusal ends `etl run` with its one message and exit 2, and nothing of Spark's: a binding
refusal (a table another job owns) is raised while the Python workers' warm-up job still runs
(etl.job.warm_up), and the process used to leave under it, so that Spark logged "Python worker
exited unexpectedly (crashed)" ERROR lines and their stack traces after the refusal."""
from __future__ import annotations

import re

from tests.harness.data import loaded_job
from tests.harness.etl_process import run_etl

SPARK_NOISE = re.compile(r"Python worker exited unexpectedly|crashed|^\s+at [\w.$]+\(|ERROR (org\.apache|py4j)",
                         re.MULTILINE)

# The job's own lines (etl: ..., or a log line of an etl module), and the one line every JVM
# started with Spark's options prints before any logging is set up.
JOBS_OWN = re.compile(r"^(etl: |\d{4}-\d\d-\d\dT[\d:.]+Z (INFO|WARNING|ERROR) etl[.\w]*: )")
JVM_START = {"WARNING: Using incubator modules: jdk.incubator.vector"}


def test_a_binding_refusal_ends_the_run_without_spark_errors(new_topic, produce, write_config, hive_table_name):
    topic, _ = loaded_job(new_topic, produce, write_config, partitions=2, per_partition=10)
    second = write_config(kafka={"topics": topic}, job={"name": "another-job"})
    for attempt in range(2):  # the warm-up's timing varies: each attempt must be as quiet
        result = run_etl(second)
        assert result.returncode == 2, result.describe()
        assert f"table etl_test.{hive_table_name} is loaded by another job" in result.stderr
        assert not SPARK_NOISE.search(result.stderr), f"attempt {attempt}: " + result.stderr[-6000:]
        others = [line for line in result.stderr.splitlines()
                  if line.strip() and not JOBS_OWN.match(line) and line not in JVM_START]
        assert others == [], f"attempt {attempt}: " + result.stderr[-6000:]  # no WARN of Spark's either
