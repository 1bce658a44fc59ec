"""The fixed cost of an `etl run` with nothing new (the CLI, a fresh process), and for
reference the Spark session start-up in a fresh process."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from tests.harness.paths import ETL as ETL_CLI
from tests.perf.common import say, summarize
from tests.perf.context import BenchRun
from tests.perf.data import produce_checked, value_maker
from tests.perf.phases import run_job_timed


def fixed_cost(run: BenchRun) -> None:
    """`etl run` (the CLI, a fresh process) on a job that has loaded everything: nothing to do."""
    if run.last_full_config is None:  # --fixed-cost-only: load something first
        from etl.config import load_config
        topic = run.new_topic(2, "fixed")
        produce_checked(run.stack.kafka_bootstrap, topic, {0: 100, 1: 100}, value_maker("json", 130))
        run.last_full_config = load_config(run.ini("fixed", [topic], "json", 1000))
        run.start_spark()
        run_job_timed(run.last_full_config)
    ini = str(run.last_full_config.path)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    runs, imports, cli_said = [], [], ""
    for rep in range(1, 6):
        def cli():
            return subprocess.run([ETL_CLI, "run", "--config", ini], env=env, capture_output=True, text=True,
                                  timeout=120, start_new_session=True)
        done, stats = run.measure(f"etl run, nothing new #{rep}", cli)
        if done.returncode != 0 or "nothing to do" not in done.stderr or "COMMITTED" in done.stdout:
            raise RuntimeError(f"`etl run` with nothing new: exit {done.returncode}\n{done.stdout}\n{done.stderr}")
        if "SparkContext" in done.stderr or "SparkSession" in done.stderr:
            say("warning: the no-data run seems to have started Spark")
        runs.append(stats)
        cli_said = next((line for line in done.stderr.splitlines() if "nothing to do" in line), "")
    for rep in range(1, 6):
        started = time.monotonic()
        subprocess.run([sys.executable, "-c", "import etl.cli, etl.ops.run, etl.job.driver"], check=True, env=env)
        imports.append(time.monotonic() - started)
    startup = []
    for rep in range(1, min(3, run.args.repeat) + 1):
        def spark_start():
            return subprocess.run([sys.executable, "-c", SPARK_STARTUP_SNIPPET, ini], env=env, capture_output=True,
                                  text=True, timeout=300, start_new_session=True)
        done, stats = run.measure(f"Spark session start-up (fresh process) #{rep}", spark_start)
        if done.returncode != 0:
            raise RuntimeError(f"Spark start-up probe failed:\n{done.stderr[-3000:]}")
        startup.append({**json.loads(done.stdout.strip().splitlines()[-1]), "process_seconds": stats["seconds"],
                        "loadavg_before": stats["loadavg_before"], "foreign_cpu_cores": stats["foreign_cpu_cores"]})
    run.report["fixed_cost"] = {
        "no_data_run_seconds": summarize([r["seconds"] for r in runs]),
        "no_data_run_loadavg_before": [r["loadavg_before"][0] for r in runs],
        "no_data_run_foreign_cpu_cores": [r["foreign_cpu_cores"] for r in runs],
        "no_data_run_said": cli_said,
        "python_imports_seconds": summarize(imports),
        "spark_startup": {k: summarize([s[k] for s in startup]) for k in startup[0] if k != "loadavg_before"},
    }

# -- 3: memory -----------------------------------------------------------------------------


SPARK_STARTUP_SNIPPET = r"""
import json, sys, time
t0 = time.monotonic()
from etl.config import load_config
from etl.hive.spark import build_spark
config = load_config(sys.argv[1])
t1 = time.monotonic()
spark = build_spark(config)
t2 = time.monotonic()
spark.sql("SHOW DATABASES").collect()
t3 = time.monotonic()
spark.sparkContext.parallelize([1, 2], 2).map(lambda x: x).collect()
t4 = time.monotonic()
spark.stop()
print(json.dumps({"imports_seconds": t1 - t0, "session_seconds": t2 - t1, "first_metastore_call_seconds": t3 - t2,
                  "first_python_task_seconds": t4 - t3}))
"""
