"""The tests' one SparkSession, with Hive support through the shared metastore."""
from __future__ import annotations

from tests.harness.paths import HIVE_WAREHOUSE
from tests.harness.stack import Stack


def tests_session(stack: Stack):
    """Spark allows one active session per process: tests use this one instead of building
    their own (getOrCreate would hand back this session without their settings anyway)."""
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master("local[2]")
        .appName("etl-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.hadoop.hive.metastore.uris", stack.metastore_uri)
        .config("spark.sql.warehouse.dir", f"file://{HIVE_WAREHOUSE}")
        .enableHiveSupport()
        .getOrCreate()
    )


def rejected_errors(spark, db: str, table: str) -> list[str]:
    """The reasons in `db`.`table`_rejected, sorted, read afresh (REFRESH: the ETL wrote files)."""
    spark.sql(f"REFRESH TABLE `{db}`.`{table}_rejected`")
    return sorted(r.error for r in spark.sql(f"SELECT error FROM `{db}`.`{table}_rejected`").collect())
