"""--skipping: what the files' layout (etl.sink.layout) lets an engine skip, shown by Spark's own
scan metrics and DuckDB's time, on one topic loaded into one table per layout.

The records are the bench's JSON events, but with a user id drawn from a million (a
multiplicative hash of the record number, so every run draws the same) instead of seven: a point
lookup on it is what a bloom filter or a sort is for. Each layout's table is loaded by the real
job (run_job, one batch, a file per Kafka partition, row groups of [job] row_group_size rows),
and each query runs --repeat times on each engine:

  spark   the bench's session, AQE off so that the executed plan is the one that ran; the Parquet
          scan's "number of output rows" is what the scan handed on: rows of the row groups and
          pages it did not skip (record-level filtering is off, Spark's default), against every
          row of the files
  duckdb  read_parquet over the same files, count(*); its median seconds

Layouts: the default (hive-2.3 readers: a dictionary where values repeat, the page index), a
bloom filter on user_id, row groups sorted by user_id, and the current readers with zstd, the
bloom filter and the sort together; and, on the same records, the Spark peer's files
(tests/perf/peer_job.py: Spark's Kafka source and Parquet file sink, parquet-mr's own choices).
"""
from __future__ import annotations

import statistics
import time
from pathlib import Path

from tests.perf.common import MB, say, spread
from tests.perf.context import BenchRun
from tests.perf.data import produce_checked
from tests.perf.peer_job import connector_jars, run_query
from tests.perf.phases import run_job_timed
from tests.perf.side_by_side import check_written, data_files

USERS = 1_000_003  # a prime: i * HASH % USERS visits every id
HASH = 2_654_435_761
LAYOUTS = {
    "default": ({}, {}),
    "bloom": ({"bloom_filter_columns": "user_id"}, {}),
    "sorted": ({"sort_by": "user_id"}, {}),
    "current_zstd_bloom_sorted": ({"parquet_readers": "current", "bloom_filter_columns": "user_id",
                                   "sort_by": "user_id"}, {"compression": "zstd"}),
}


def user_of(i: int) -> str:
    return f"user-{i * HASH % USERS}"


def make(i: int) -> bytes:
    return (f'{{"event_id": {i}, "user_id": "{user_of(i)}", "action": "click", "amount": {i / 10!r}, '
            f'"ts": "2026-11-21 10:{i // 60 % 60:02d}:{i % 60:02d}", "ok": {"true" if i % 2 == 0 else "false"}}}'
            ).encode()


def queries(records: int) -> dict[str, str]:
    present = user_of(records // 3)
    return {
        "user_id = present": f"user_id = '{present}'",
        "user_id = absent": "user_id = 'user-none'",
        "user_id IN 3": "user_id IN ({})".format(", ".join(f"'{user_of(records // k)}'" for k in (2, 5, 7))),
        "kafka_offset range (1%)": f"kafka_offset BETWEEN 1000 AND {1000 + records // 100 // 4}",
    }


def skipping_bench(run: BenchRun) -> None:
    args = run.args
    run.session_spark = {"spark.jars": connector_jars()}
    run.start_spark()
    run.spark.conf.set("spark.sql.adaptive.enabled", "false")
    topic = run.new_topic(args.partitions, "skip")
    per = spread(args.records, args.partitions)
    say(f"producing {args.records:,} JSON records with a user id among {USERS:,} into {topic}")
    produced = produce_checked(run.stack.kafka_bootstrap, topic, dict(enumerate(per)), make)
    ranges = [(topic, p, low, high) for p, (low, high) in sorted(produced["watermarks"].items())]
    report: dict = {"records": produced["records"], "partitions": args.partitions, "layouts": {}}
    for label, (hive, job) in LAYOUTS.items():
        files = _load(run, f"skip-{label}", topic, ranges, produced["records"], max(per) + 1, hive, job)
        report["layouts"][label] = _query_all(run, files, produced["records"])
    report["layouts"]["spark_peer"] = _query_all(run, _peer(run, topic, ranges, produced["records"]),
                                                 produced["records"])
    report["table"] = render(report)
    run.report["skipping"] = report


def _load(run: BenchRun, label: str, topic: str, ranges: list, records: int, max_records: int, hive: dict,
          job: dict) -> list[Path]:
    from etl.config import load_config
    from etl.model.naming import table_location
    config = load_config(run.ini(label, [topic], "json", max_records, hive=hive, **job))
    phases, _said = run_job_timed(config)
    folder = Path(table_location(str(run.work / "warehouse"), config.hive.database, config.hive.table))
    written = check_written(folder, ranges, records)
    say(f"  {label}: batch {phases['batch']:.2f}s, {written['files']} files, {written['bytes'] / MB:.2f} MB")
    return data_files(folder)


def _peer(run: BenchRun, topic: str, ranges: list, records: int) -> list[Path]:
    folder, checkpoint = run.work / "skip-peer" / "out", run.work / "skip-peer" / "checkpoint"
    done = run_query(run.spark, run.stack.kafka_bootstrap, topic, folder.as_uri(), checkpoint.as_uri())
    written = check_written(folder, ranges, records)
    say(f"  spark_peer: query {done['seconds']:.2f}s, {written['files']} files, {written['bytes'] / MB:.2f} MB")
    return data_files(folder)


def _query_all(run: BenchRun, files: list[Path], records: int) -> dict:
    import duckdb
    found: dict = {"bytes": sum(f.stat().st_size for f in files), "files": len(files), "queries": {}}
    listed = ", ".join(f"'{f}'" for f in files)
    for name, where in queries(records).items():
        spark_rows, scanned, spark_s = [], [], []
        duck_rows, duck_s = [], []
        for _ in range(run.args.repeat):
            rows, out, seconds = spark_count(run.spark, [str(f) for f in files], where)
            spark_rows.append(rows)
            scanned.append(out)
            spark_s.append(seconds)
            start = time.perf_counter()
            counted = duckdb.sql(f"SELECT count(*) FROM read_parquet([{listed}]) WHERE {where}").fetchall()
            duck_rows.append(counted[0][0])
            duck_s.append(time.perf_counter() - start)
        if len(set(spark_rows + duck_rows)) != 1:
            raise RuntimeError(f"{name}: Spark counted {spark_rows}, DuckDB {duck_rows}")
        found["queries"][name] = {"rows": spark_rows[0], "spark_scan_rows": statistics.median(scanned),
                                  "spark_s": statistics.median(spark_s), "duckdb_s": statistics.median(duck_s)}
    return found


def spark_count(spark, files: list[str], where: str) -> tuple[int, int, float]:
    """(rows matching, rows the Parquet scan handed on, seconds) of one count(*) in Spark."""
    frame = spark.read.parquet(*files).where(where).groupBy().count()
    start = time.perf_counter()
    rows = frame.collect()[0][0]
    seconds = time.perf_counter() - start
    leaves = frame._jdf.queryExecution().executedPlan().collectLeaves()
    scanned = sum(leaves.apply(i).metrics().get("numOutputRows").get().value() for i in range(leaves.size())
                  if leaves.apply(i).metrics().contains("numOutputRows"))
    return rows, scanned, seconds


def render(report: dict) -> str:
    lines = [f"Skipping: {report['records']:,} records, {report['partitions']} files a layout; the Parquet scan's "
             f"output rows in Spark (of {report['records']:,}), Spark's and DuckDB's median seconds"]
    names = list(next(iter(report["layouts"].values()))["queries"])
    lines.append("| layout | MB | " + " | ".join(names) + " |")
    lines.append("|---|---:|" + "---:|" * len(names))
    for label, found in report["layouts"].items():
        cells = [f"{q['spark_scan_rows']:,} rows, {q['spark_s']:.2f} s / {q['duckdb_s']:.3f} s"
                 for q in found["queries"].values()]
        lines.append(f"| {label} | {found['bytes'] / MB:.2f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
