"""The peer: what a PySpark user writes instead of this tool to get Kafka into Hive.

Spark's own Kafka source (spark-sql-kafka-0-10) and file sink, as a scheduled Structured
Streaming query with trigger(availableNow=True): read the topic from the earliest offsets (the
checkpoint remembers where the last run stopped), parse the JSON with from_json into the columns
of warehouse_schema/events.sql, keep Kafka's topic, partition, offset and timestamp so that a
record can be found again, partition by dt and hour of the Kafka timestamp (UTC, dt=YYYY-MM-DD,
hour=HH, as our job names them), write snappy Parquet (our job's default codec and Spark's).
With --table, an external Hive table over the output folder and MSCK REPAIR TABLE, so that Hive
sees the new partitions.

Nothing is tuned that its users would not know: no maxOffsetsPerTrigger, no minPartitions,
failOnDataLoss at its default. It is part of the bench and the test harness, never of etl/.

    .venv/bin/python -m tests.perf.peer_job --bootstrap 127.0.0.1:9092 --topic T --output DIR \\
        --checkpoint DIR [--parse json|string] [--parallelism 2] [--table DB.NAME] \\
        [--metastore thrift://127.0.0.1:9083] [--timestamp-format 'yyyy-MM-dd HH:mm:ss']

The functions (build_session, run_query, register_table) are what the bench calls in its own
Spark session; the module's command line is one whole scheduled run, as a process.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONNECTOR_JARS = REPO / ".stack" / "jars" / "spark-kafka"
COMPRESSION = "snappy"  # etl.config.model.Compression.SNAPPY, the job's default; Spark's default too

# The columns of warehouse_schema/events.sql, as a DDL string for from_json and the table.
EVENT_COLUMNS = "event_id BIGINT, user_id STRING, action STRING, amount DOUBLE, ts TIMESTAMP, ok BOOLEAN"
KAFKA_COLUMNS = "kafka_topic STRING, kafka_partition INT, kafka_offset BIGINT, kafka_timestamp TIMESTAMP"
PARTITION_COLUMNS = "dt STRING, hour STRING"
KAFKA_NAMES = ("kafka_topic", "kafka_partition", "kafka_offset", "kafka_timestamp")


def connector_jars() -> str:
    """spark.jars: the Kafka connector and its dependencies, comma-separated absolute paths."""
    jars = sorted(str(path) for path in CONNECTOR_JARS.glob("*.jar"))
    if not jars:
        raise SystemExit(f"peer_job: no jars in {CONNECTOR_JARS}; run scripts/setup --tests")
    return ",".join(jars)


def build_session(parallelism: int, metastore: str):
    """local[P] with Hive support against the stack's metastore, the connector on spark.jars.
    The driver keeps Spark's default heap (1g), as the job does; the UI is off, as in the
    bench's job configs; the driver listens on loopback, as the job's local master does."""
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.appName("peer-kafka-to-parquet")
             .master(f"local[{parallelism}]")
             .config("spark.jars", connector_jars())
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.hadoop.hive.metastore.uris", metastore)
             .enableHiveSupport()
             .getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    return spark


def columns(parse: str) -> str:
    """The table's data columns (without dt, hour) for --parse json or string."""
    return f"{EVENT_COLUMNS}, {KAFKA_COLUMNS}" if parse == "json" else f"value STRING, {KAFKA_COLUMNS}"


def run_query(spark, bootstrap: str, topic: str, output: str, checkpoint: str, parse: str = "json",
              timestamp_format: str | None = None) -> dict:
    """One scheduled run: whatever the topic holds beyond the checkpoint, into Parquet under
    `output`; returns {records, seconds, batches, duration_ms} (records: the sum of the query's
    numInputRows; duration_ms: its progress reports' durationMs, summed by key).
    timestamp_format: from_json's timestampFormat option (by default none, as users first write
    it: Spark then tries its ISO 8601 pattern on each value and falls back to its lenient parser)."""
    from pyspark.sql import functions as F
    started = time.monotonic()
    source = (spark.readStream.format("kafka")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic)
              .option("startingOffsets", "earliest")
              .load())
    kafka = [F.col("topic").alias("kafka_topic"), F.col("partition").alias("kafka_partition"),
             F.col("offset").alias("kafka_offset"), F.col("timestamp").alias("kafka_timestamp"),
             F.date_format("timestamp", "yyyy-MM-dd").alias("dt"), F.date_format("timestamp", "HH").alias("hour")]
    value = F.col("value").cast("string")
    if parse == "json":
        options = {"timestampFormat": timestamp_format} if timestamp_format else {}
        rows = source.select(F.from_json(value, EVENT_COLUMNS, options).alias("e"), *kafka) \
            .select("e.*", *KAFKA_NAMES, "dt", "hour")
    else:
        rows = source.select(value.alias("value"), *kafka)
    query = (rows.writeStream.format("parquet")
             .option("path", output)
             .option("checkpointLocation", checkpoint)
             .option("compression", COMPRESSION)
             .partitionBy("dt", "hour")
             .trigger(availableNow=True)
             .start())
    query.awaitTermination()
    progress = query.recentProgress
    durations: dict[str, int] = {}  # where the query's time went, by Spark's own progress reports
    for report in progress:
        for key, ms in report["durationMs"].items():
            durations[key] = durations.get(key, 0) + ms
    return {"records": sum(p["numInputRows"] for p in progress),
            "batches": sum(1 for p in progress if p["numInputRows"]),
            "seconds": time.monotonic() - started, "duration_ms": durations}


def register_table(spark, table: str, output: str, parse: str = "json") -> float:
    """What the peer's users do so that Hive sees the new partitions: an external table over
    the output folder (once), then MSCK REPAIR TABLE (every run). Returns its seconds."""
    started = time.monotonic()
    database = table.split(".")[0] if "." in table else "default"
    spark.sql(f"CREATE DATABASE IF NOT EXISTS `{database}`")
    spark.sql(f"CREATE EXTERNAL TABLE IF NOT EXISTS {table} ({columns(parse)}) "
              f"PARTITIONED BY ({PARTITION_COLUMNS}) STORED AS PARQUET LOCATION '{output}'")
    spark.sql(f"MSCK REPAIR TABLE {table}")
    return time.monotonic() - started


def as_uri(path: str) -> str:
    """A folder given as a plain path is a local one (file://), as Spark would read it anyway."""
    return path if "://" in path else Path(path).resolve().as_uri()


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", required=True, help="Kafka bootstrap servers, HOST:PORT")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--output", required=True, help="the Parquet folder (a path or a URI)")
    parser.add_argument("--checkpoint", required=True, help="the query's checkpoint folder")
    parser.add_argument("--parse", choices=("json", "string"), default="json",
                        help="json: from_json into the table's columns; string: the value as one string column")
    parser.add_argument("--timestamp-format", help="from_json's timestampFormat (default: none, Spark's own parsing)")
    parser.add_argument("--parallelism", type=int, default=2, help="Spark local[P] (default 2)")
    parser.add_argument("--table", help="DB.NAME: an external Hive table over --output, repaired after the run")
    parser.add_argument("--metastore", default="thrift://127.0.0.1:9083")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    """One scheduled run as a process; prints one JSON line (records, batches, seconds)."""
    args = parse_args(argv)
    started = time.monotonic()
    spark = build_session(args.parallelism, args.metastore)
    output = as_uri(args.output)
    done = run_query(spark, args.bootstrap, args.topic, output, as_uri(args.checkpoint), args.parse,
                     args.timestamp_format)
    if args.table:
        done["register_seconds"] = register_table(spark, args.table, output, args.parse)
    done["query_seconds"] = done.pop("seconds")
    done["seconds"] = time.monotonic() - started
    spark.stop()
    print(json.dumps(done), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
