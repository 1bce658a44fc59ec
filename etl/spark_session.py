"""The SparkSession the driver uses: Hive support and the job's [spark] settings."""
from __future__ import annotations

import os
import sys

from etl.config import Config


def build_spark(config: Config):
    # Executors must run this interpreter, or they will not find the etl package.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    submitted = SparkConf()  # holds what spark-submit was given; it wins over the config file
    builder = SparkSession.builder.appName(f"etl-{config.job.name}").config("spark.ui.showConsoleProgress", "false")
    for key, value in config.spark.items():
        if key == "spark.master" and submitted.contains("spark.master"):
            continue
        builder = builder.config(key, value)
    if not submitted.contains("spark.master") and "spark.master" not in config.spark:
        builder = builder.master("local[*]")
    builder = builder.config("spark.sql.warehouse.dir", config.warehouse.hive_root)  # Hive's view of it
    if config.hive.metastore != "embedded":
        builder = builder.config("spark.hadoop.hive.metastore.uris", config.hive.metastore)
    spark = builder.enableHiveSupport().getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark
