#!/usr/bin/env python
"""Benchmark of the ETL against the local stack: throughput, memory, fixed cost, scale.

A benchmark, not a test: it prints figures (and checks that every run loaded exactly what it
should), but never fails because something was slow. Needs the local stack
(scripts/local-stack up) and the venv with the dev extra (scripts/setup --tests).

    .venv/bin/python scripts/bench.py                    # 1M JSON records, 4 partitions, local[2], 3 repetitions
    .venv/bin/python scripts/bench.py --memory-check     # peak Python worker RSS: a 1M vs a 10M partition-batch
    .venv/bin/python scripts/bench.py --partition-scaling 10,100,1000   # or --rollups: a batch with, without a rollup
    .venv/bin/python scripts/bench.py --event-time       # partition_by = column:ts vs planning_time; 720 partitions
    .venv/bin/python scripts/bench.py --formats          # the same events as JSON, Avro and Protobuf; Avro row by row
    .venv/bin/python scripts/bench.py --side-by-side     # ours vs Spark's and Flink's Kafka source + file sink
    .venv/bin/python scripts/bench.py --skipping         # what Spark and DuckDB skip under each file layout
    .venv/bin/python scripts/bench.py --cluster-shape    # the seeds' shape, spark-submit on local[2], standalone, YARN
    .venv/bin/python scripts/bench.py --fixed-cost       # a scheduled etl run, exec to exit, phase by phase
    .venv/bin/python scripts/bench.py --routes           # 20 topics into 20 tables in one run vs one table vs 20 jobs
    .venv/bin/python scripts/bench.py --compaction       # one partition of 504 small files: queries, etl compact, merge
    .venv/bin/python scripts/bench.py --json --json-out bench.json
    .venv/bin/python scripts/bench.py --plot docs/images --plot-from docs/perf/*.json   # charts, no Spark

The default run produces --records records into a fresh topic and measures, on exactly the
same offset ranges, in one Spark session (local[P], one task per Kafka partition), each
repeated --repeat times and interleaved so that a burst of foreign load hits them alike:

  drain       Spark tasks that consume the ranges with confluent-kafka and count (the floor)
  drain+chunk the same through etl.source.ranges.read_range (the ETL's reader, no decoding)
  full batch  the real job (etl.ops.run.run_job) on a fresh ZooKeeper root and a fresh Hive
              table: plan, tasks (read, decode, write, rename), check, register, commit
  row-by-row  per-record json.loads in the tasks, spark.createDataFrame(rdd), DataFrame writer

then the fixed cost of an `etl run` with nothing new (the CLI, a fresh process) and, for
reference, the Spark session start-up. During the full batch it samples, every 50 ms, the RSS
of the Spark Python workers (the pyspark daemon's children).

Foreign load: before every timed measurement it waits (at most --max-wait seconds in all) until
the 1-minute load average is below --load-threshold, and records the load average and the CPU
that processes outside this benchmark used while it measured. The work lives in tests/perf (one
module per measurement); this script is its command line.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

# The repository root, once, so that tests.perf (and the tests.harness it uses) import as the
# packages they are; tests/ itself never goes on the path.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from etl.config import DecoderKind  # noqa: E402
from tests.perf.plot import draw_files  # noqa: E402
from tests.perf.runner import run  # noqa: E402  (needs the path above)


def _counts(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--record-bytes", type=int, default=130)
    parser.add_argument("--decoder", choices=[kind.value for kind in DecoderKind], default="json")
    parser.add_argument("--parallelism", type=int, default=2, help="Spark local[P] (default 2)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--drain-parallelism", type=_counts, default="2,4,8",
                        help="also drain at each local[P], the best being the physical limit (default 2,4,8)")
    parser.add_argument("--drain-fetch-bytes", type=_counts, default="1048576,16777216", help="and with each "
                        "max.partition.fetch.bytes (default 1 MiB, librdkafka's and the ETL's, and 16 MiB)")
    parser.add_argument("--seeds-shape", action="store_true", help="only: 545,884 records in 18 partitions, whole "
                        "`etl run` processes at each --seeds-parallelism")
    parser.add_argument("--seeds-parallelism", type=_counts, default="2,4", help="local[P] for --seeds-shape")
    parser.add_argument("--routes", action="store_true", help="only: the seeds' records as --routes-topics topics into "
                        "as many tables in one `etl run`, vs one topic and one table, vs one job per topic (issue 30)")
    parser.add_argument("--routes-topics", type=int, default=20, help="topics (and tables) for --routes")
    parser.add_argument("--memory-check", action="store_true",
                        help="only: the full batch on one partition of 1M and one of 10M records, peak worker RSS")
    parser.add_argument("--memory-records", default="1000000,10000000", help="partition-batch sizes for --memory-check")
    parser.add_argument("--event-time", action="store_true", help="only: partition_by = column:ts vs planning_time "
                        "on --records, and peak worker RSS of a range over 1 vs 720 hourly partitions")
    parser.add_argument("--event-memory-records", type=int, default=300_000, help="records per range for --event-time")
    parser.add_argument("--formats", action="store_true",
                        help="only: the full batch over the same --records as JSON, Avro and Protobuf (schemas in a "
                             "Schema Registry test server), and a row-by-row createDataFrame path over the Avro data")
    parser.add_argument("--side-by-side", action="store_true",
                        help="only: our full batch vs Spark's own Kafka source and Parquet file sink "
                             "(tests/perf/peer_job.py), parsed and as a string, in-process, and Flink's (a process), "
                             "on the same --records; then the seeds' shape as whole processes of ours and Spark's")
    parser.add_argument("--skipping", action="store_true", help="only: --records into one table per file layout; "
                        "point and range queries in Spark (its scan's output rows) and DuckDB")
    parser.add_argument("--rollups", action="store_true", help="only: no rollup, one in Hive, one in PostgreSQL too")
    parser.add_argument("--compaction", action="store_true", help="only: GROUP BY over one Hive partition of "
                        "partitions x batches small files, `etl compact` on it, the GROUP BY again; merge_files vs a "
                        "plain pyarrow rewrite of the same files")
    parser.add_argument("--compaction-records", type=int, default=545_884, help="records for --compaction")
    parser.add_argument("--compaction-partitions", type=int, default=18, help="Kafka partitions for --compaction")
    parser.add_argument("--compaction-batches", type=int, default=28, help="batches (files per partition)")
    parser.add_argument("--cluster-shape", action="store_true",
                        help="only: the seeds' shape as one spark-submit on local[2], the standalone cluster and "
                             "YARN (client and cluster mode); starts scripts/local-stack up spark and up yarn")
    parser.add_argument("--cluster-managers", type=lambda text: text.split(","),
                        default="local,standalone,yarn-client,yarn-cluster", help="for --cluster-shape")
    parser.add_argument("--crash-compare", action="store_true", help="only: one seeded SIGKILL campaign for our "
                        "job and for --crash-peer's (Spark's or Flink's file sink), counted by Hive, DuckDB, Spark")
    parser.add_argument("--crash-peer", choices=("spark", "flink", "both"), default="spark")
    parser.add_argument("--crash-kills", type=int, default=10, help="SIGKILLs per job for --crash-compare")
    parser.add_argument("--seed", type=int, default=20261126, help="the kill delays' seed for --crash-compare")
    parser.add_argument("--partition-scaling", metavar="N,N,...", help="only: plan and commit time, N partitions")
    parser.add_argument("--scaling-records", type=int, default=3, help="records per partition per batch (default 3)")
    parser.add_argument("--scaling-batches", type=int, choices=(1, 2), default=2,
                        help="batches per partition count: 1 (offsets created) or 2 (also updated; default)")
    parser.add_argument("--scaling-topics", type=int, metavar="T", help="only: one routed job over T topics of "
                        "--scaling-topic-partitions, a table each (issue 30)")
    parser.add_argument("--scaling-topic-partitions", type=int, default=10)
    parser.add_argument("--scaling-zk-only", action="store_true", help="measure partition scaling on ZooKeeper alone")
    parser.add_argument("--profile", action="store_true",
                        help="also profile one range in this process (reader, decoder, whole task under cProfile)")
    parser.add_argument("--py-spy", action="store_true",
                        help="also run one more full batch with py-spy sampling the Spark Python workers "
                             "(py-spy is in the dev extra that scripts/setup --tests installs)")
    parser.add_argument("--fixed-cost", action="store_true", help="only: a scheduled `etl run` process phase by "
                        "phase, exec to exit: nothing new, one record, the seeds' shape (medians of --repeat)")
    parser.add_argument("--variant", action="append", nargs="+", metavar=("NAME", "VAR=VALUE"), default=[],
                        help="with --fixed-cost, also run with these variables set, e.g. ETL__JVM__QUICK_START=false")
    parser.add_argument("--no-fixed-cost", action="store_true", help="skip the no-data run and Spark start-up timing")
    parser.add_argument("--load-threshold", type=float, default=1.0, help="measure when the 1-minute load is below it")
    parser.add_argument("--max-wait", type=float, default=None, help="seconds to wait for a quiet machine, in all "
                        "(default 1200, 90 with --compaction; 0: never)")
    parser.add_argument("--json", action="store_true", help="print the results as one JSON object")
    parser.add_argument("--json-out", metavar="FILE", help="write the JSON object to FILE (implies --json)")
    parser.add_argument("--plot", metavar="DIR", help="also draw what the run measured as PNG charts into DIR")
    parser.add_argument("--plot-from", metavar="FILE", nargs="+",
                        help="only: draw the charts into --plot DIR from saved --json-out files (no Spark)")
    parser.add_argument("--keep", action="store_true", help="keep topics, ZooKeeper nodes, tables and files")
    parser.add_argument("--verbose", action="store_true", help="show the job's INFO log lines")
    args = parser.parse_args(argv)
    if args.records < args.partitions or args.partitions < 1 or args.repeat < 1 or args.parallelism < 1:
        parser.error("need --records >= --partitions >= 1, --repeat >= 1 and --parallelism >= 1")
    if args.plot_from and not args.plot:
        parser.error("--plot-from needs --plot DIR")
    if args.max_wait is None:
        args.max_wait = 90.0 if args.compaction else 1200.0
    return args


if __name__ == "__main__":
    options = parse(sys.argv[1:])
    sys.exit(draw_files(options.plot_from, Path(options.plot)) if options.plot_from else run(options, sys.argv[1:]))
