"""Airflow DAGs: load the Kafka topics into Hive every hour, then wait for the closed hour's `_SUCCESS`.

The closed hour's marker, when found, is an event of the table's Asset (the DAGs' outlet), so
that downstream DAGs can be scheduled on the table:
schedule=[Asset(name="<database>.<table>", uri="hive://<database>/<table>")].

Two DAGs with the same schedule and the same sensor; use one of them:
  etl_kafka_to_hive                 spark-submit through a BashOperator (the one we recommend)
  etl_kafka_to_hive_spark_submit    the same through the Spark provider's SparkSubmitOperator and
                                    its connection spark_default (master, deploy mode, binary)

Install: copy this file into Airflow's dags folder and set the Variables below (Admin ->
Variables, or AIRFLOW_VAR_<NAME> in the environment). docs/scheduling.md explains each choice.

Variables (default in brackets):
  etl_table               the Hive table, as database.table: the name of the DAGs' Asset. Read
                          when the file is parsed, so it must be set before (no default)
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

Retries: only a run that exited 75 (EXIT_RETRYABLE: a service did not answer) is retried. Any
other failure (1: an operator must act; 2: the config or command line is wrong) raises
AirflowFailException, which fails the task at once, whatever `retries` says: running again
would fail the same way.

No logical date needed: Airflow 3 runs a DAG without one when it is triggered through the API or
by an asset. The sensor's hour is the one that closed before the run was due: the end of its data
interval, or, for a run without one, its `run_after` (which every run has).
"""
from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.providers.standard.operators.bash import BashOperator
from airflow.providers.standard.sensors.filesystem import FileSensor
from airflow.sdk import DAG, Asset, Variable

LOCK_HELD = 99  # BashOperator's default skip_on_exit_code
RETRYABLE = 75  # etl's EXIT_RETRYABLE (EX_TEMPFAIL): the only exit that a retry can help
EXIT_MEANINGS = {1: "needs an operator (docs/operating.md)", 2: "a usage or config error"}

# Values are passed to bash through the environment, never pasted into the command: no quoting
# problem whatever the paths hold.
RUN_ETL = (
    'app="$("$ETL_PYTHON" -c "import etl.__main__ as m; print(m.__file__)")" && '
    'PYSPARK_PYTHON="$ETL_PYTHON" PYSPARK_DRIVER_PYTHON="$ETL_PYTHON" '
    f'exec "$ETL_SPARK_SUBMIT" $ETL_SPARK_ARGS "$app" run --config "$ETL_CONFIG" --lock-held-exit-code {LOCK_HELD}'
)


def table_asset() -> Asset:
    """The Hive table the DAGs load; its events are its closed hours."""
    table = Variable.get("etl_table", default=None)
    if not table or table.count(".") != 1:
        raise ValueError(f"Airflow Variable etl_table is {table!r}: set it to the job's Hive table as database.table "
                         "([hive] database and table), the name of the Asset that downstream DAGs schedule on")
    database, name = table.split(".")
    return Asset(name=table, uri=f"hive://{database}/{name}", group="hive")


def failure(exit_code: int | None, error: AirflowException) -> AirflowException:
    """What a failed `etl run` raises: skipped on LOCK_HELD, the error itself (so Airflow retries)
    on RETRYABLE, and AirflowFailException (failed, never retried) on anything else."""
    if exit_code == LOCK_HELD:
        return AirflowSkipException("another run holds the job's lock: nothing was loaded")
    if exit_code == RETRYABLE:
        return error
    meaning = EXIT_MEANINGS.get(exit_code, "not a code a retry can help") if exit_code is not None else "no exit code"
    return AirflowFailException(f"etl run exited {exit_code} ({meaning}): not retried, running again would fail the "
                                f"same way; only exit {RETRYABLE} is retried")


class EtlBashOperator(BashOperator):
    """BashOperator for `etl run`: retried only on exit RETRYABLE (skip_on_exit_code=LOCK_HELD skips)."""

    def execute(self, context):
        try:
            return super().execute(context)
        except AirflowSkipException:
            raise
        except AirflowException as error:
            ran = getattr(self.subprocess_hook, "sub_process", None)  # the bash process the hook ran
            raise failure(ran.returncode if ran is not None else None, error) from error


class EtlSparkSubmitOperator(SparkSubmitOperator):
    """SparkSubmitOperator for `etl run`: LOCK_HELD (another run holds the job's lock) ends the
    task as skipped instead of failed, and only exit RETRYABLE is retried."""

    def execute(self, context):
        try:
            return super().execute(context)
        except AirflowException as error:
            submitted = getattr(self._hook, "_submit_sp", None)  # the spark-submit process the hook ran
            raise failure(submitted.returncode if submitted is not None else None, error) from None


def closed_hour(due: dt.datetime, zone: str, partition_format: str) -> str:
    """The partition of the hour that closed before the run was `due`: the run due at 11:10 waits for
    hour 10's marker. The minute of the schedule must be later than [hive]
    success_marker_delay_seconds, so that the run itself writes that marker (by planning time;
    by event time the watermark decides)."""
    return (due - dt.timedelta(hours=1)).astimezone(ZoneInfo(zone)).strftime(partition_format)


class ClosedHourMarker(FileSensor):
    """A FileSensor on the `_SUCCESS` marker of the hour that closed before the run was due: the
    end of the DAG run's data interval, or its `run_after` when it has none, never its logical
    date (None for runs triggered through the API or by an asset; and the start of the interval,
    an hour early, under a timetable with data intervals). When found, it is an event of the
    table's Asset, with the partition."""

    template_fields = (*FileSensor.template_fields, "table_path", "partition_format", "partition_timezone")

    def __init__(self, *, table: Asset, table_path: str, partition_format: str, partition_timezone: str, **kwargs):
        super().__init__(filepath="", outlets=[table], **kwargs)
        self.table, self.table_path = table, table_path
        self.partition_format, self.partition_timezone = partition_format, partition_timezone

    def execute(self, context):
        run = context["dag_run"]
        # data_interval_end: a scheduled run's, or the date `airflow dags test DAG DATE` was given;
        # run_after: a run without a logical date (triggered through the API or by an asset).
        due = run.data_interval_end or run.run_after
        partition = closed_hour(due, self.partition_timezone, self.partition_format)
        self.filepath = f"{self.table_path}/{partition}/_SUCCESS"
        super().execute(context)
        context["outlet_events"][self.table].extra = {"partition": partition, "marker": self.filepath}


def closed_hour_marker(table: Asset) -> FileSensor:
    # On the marker, not on the Hive partition: the first batch of an hour registers the
    # partition, so it exists long before the hour's last rows are loaded.
    return ClosedHourMarker(
        task_id="closed_hour_success_marker",
        table=table,
        table_path="{{ var.value.get('etl_table_path') }}",
        partition_format="{{ var.value.get('etl_partition_format', 'dt=%Y-%m-%d/hour=%H') }}",
        partition_timezone="{{ var.value.get('etl_partition_timezone', 'UTC') }}",
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
        # Only etl_run's exit 75 is retried: its other failures raise AirflowFailException.
        default_args={"retries": 2, "retry_delay": dt.timedelta(minutes=5)},
        tags=["etl"],
    )


TABLE = table_asset()

with hourly("etl_kafka_to_hive", "etl run (Kafka to Hive, exactly once), then the closed hour's _SUCCESS marker"):
    run = EtlBashOperator(
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
    run >> closed_hour_marker(TABLE)

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
    run >> closed_hour_marker(TABLE)
