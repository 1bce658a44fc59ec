"""Airflow DAGs: load the Kafka topics into Hive every hour, then wait for the closed hour's `_SUCCESS`.

Two DAGs with the same schedule and the same sensor; use one of them:
  etl_kafka_to_hive                 spark-submit through a BashOperator (the one we recommend)
  etl_kafka_to_hive_spark_submit    the same through the Spark provider's SparkSubmitOperator and
                                    its connection spark_default (master, deploy mode, binary)

Install: copy this file into Airflow's dags folder and set the Variables below (Admin ->
Variables, or AIRFLOW_VAR_<NAME> in the environment). docs/scheduling.md explains each choice.

Variables (default in brackets):
  etl_config              the job's INI file [/etc/etl/etl.ini]
  etl_python              a Python that has the etl package installed: spark-submit runs the
                          package's etl/__main__.py with it, driver and executors [python3]
  etl_spark_submit        the spark-submit binary [spark-submit]
  etl_spark_args          more spark-submit arguments, e.g. --master yarn --deploy-mode client [none]
  etl_table_path          the main table's folder, where the partitions' `_SUCCESS` markers are
                          written, e.g. /warehouse/etl.db/events (needs [hive] success_markers = true)
  etl_partition_format    the partition folder of an hour, as strftime [dt=%Y-%m-%d/hour=%H]
  etl_partition_timezone  [hive] partition_timezone [UTC]
The sensor reads files through the Airflow connection `fs_default` (type File (path), path /).

  etl_application         (etl_kafka_to_hive_spark_submit only) the installed package's
                          etl/__main__.py, as `python -c "import etl.__main__ as m; print(m.__file__)"` prints

Why BashOperator first: `etl run --lock-held-exit-code 99` must end as "skipped" when another run
holds the job's lock. BashOperator's skip_on_exit_code does exactly that. SparkSubmitOperator
turns every non-zero exit into a failure, so EtlSparkSubmitOperator below maps exit 99 to a skip
by reading the exit code its hook saw: that relies on the provider's internals (tested with
apache-airflow-providers-apache-spark 6.3.4, deploy/airflow/requirements.txt).
"""
from __future__ import annotations

import datetime as dt

from airflow.sdk.exceptions import AirflowException, AirflowSkipException
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.providers.standard.operators.bash import BashOperator
from airflow.providers.standard.sensors.filesystem import FileSensor
from airflow.sdk import DAG

LOCK_HELD = 99  # BashOperator's default skip_on_exit_code

# Values are passed to bash through the environment, never pasted into the command: no quoting
# problem whatever the paths hold.
RUN_ETL = (
    'app="$("$ETL_PYTHON" -c "import etl.__main__ as m; print(m.__file__)")" && '
    'PYSPARK_PYTHON="$ETL_PYTHON" PYSPARK_DRIVER_PYTHON="$ETL_PYTHON" '
    f'exec "$ETL_SPARK_SUBMIT" $ETL_SPARK_ARGS "$app" run --config "$ETL_CONFIG" --lock-held-exit-code {LOCK_HELD}'
)

# The hour that closed before this run: the run at 11:10 waits for hour 10's marker. The minute
# of the schedule must be later than [hive] success_marker_delay_seconds, so that the run itself
# writes that marker (by planning time; by event time the watermark decides).
CLOSED_HOUR = ("(logical_date - macros.timedelta(hours=1))"
               ".in_timezone(var.value.get('etl_partition_timezone', 'UTC'))"
               ".strftime(var.value.get('etl_partition_format', 'dt=%Y-%m-%d/hour=%H'))")


class EtlSparkSubmitOperator(SparkSubmitOperator):
    """SparkSubmitOperator where `etl run` exiting LOCK_HELD (another run holds the job's lock)
    ends the task as skipped instead of failed."""

    def execute(self, context):
        try:
            return super().execute(context)
        except AirflowException:
            submitted = getattr(self._hook, "_submit_sp", None)  # the spark-submit process the hook ran
            if submitted is not None and submitted.returncode == LOCK_HELD:
                raise AirflowSkipException("another run holds the job's lock: nothing was loaded") from None
            raise


def closed_hour_marker() -> FileSensor:
    # On the marker, not on the Hive partition: the first batch of an hour registers the
    # partition, so it exists long before the hour's last rows are loaded.
    return FileSensor(
        task_id="closed_hour_success_marker",
        filepath="{{ var.value.get('etl_table_path') }}/{{ " + CLOSED_HOUR + " }}/_SUCCESS",
        fs_conn_id="fs_default",
        mode="reschedule",
        poke_interval=60,
        timeout=3 * 3600,
        # Also when etl_run was skipped: the run holding the lock writes the marker as well.
        trigger_rule="none_failed",
    )


def hourly(dag_id: str, description: str) -> DAG:
    return DAG(
        dag_id=dag_id,
        description=description,
        schedule="10 * * * *",
        start_date=dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc),
        catchup=False,  # one run loads everything new: there is nothing to backfill hour by hour
        max_active_runs=1,
        default_args={"retries": 2, "retry_delay": dt.timedelta(minutes=5)},
        tags=["etl"],
    )


with hourly("etl_kafka_to_hive", "etl run (Kafka to Hive, exactly once), then the closed hour's _SUCCESS marker"):
    run = BashOperator(
        task_id="etl_run",
        bash_command=RUN_ETL,
        env={
            "ETL_CONFIG": "{{ var.value.get('etl_config', '/etc/etl/etl.ini') }}",
            "ETL_PYTHON": "{{ var.value.get('etl_python', 'python3') }}",
            "ETL_SPARK_SUBMIT": "{{ var.value.get('etl_spark_submit', 'spark-submit') }}",
            "ETL_SPARK_ARGS": "{{ var.value.get('etl_spark_args', '') }}",
        },
        append_env=True,  # keep PATH, JAVA_HOME, HADOOP_CONF_DIR and the like
        skip_on_exit_code=LOCK_HELD,
    )
    run >> closed_hour_marker()

with hourly("etl_kafka_to_hive_spark_submit", "the same as etl_kafka_to_hive, through SparkSubmitOperator"):
    python = "{{ var.value.get('etl_python', 'python3') }}"
    run = EtlSparkSubmitOperator(
        task_id="etl_run",
        conn_id="spark_default",  # master, deploy mode and spark-binary (spark-submit on the PATH)
        application="{{ var.value.get('etl_application') }}",
        application_args=["run", "--config", "{{ var.value.get('etl_config', '/etc/etl/etl.ini') }}",
                          "--lock-held-exit-code", str(LOCK_HELD)],
        env_vars={"PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python},
        name="etl",
    )
    run >> closed_hour_marker()
