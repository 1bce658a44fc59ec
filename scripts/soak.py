#!/usr/bin/env python
"""Soak the exactly-once guarantee: thousands of random SIGKILLs of `etl run`, then the oracle.

    .venv/bin/python scripts/soak.py --kills 2000 --seed 7

Runs against the local stack (scripts/local-stack up; ports from ETL_ZK_PORT, ETL_KAFKA_PORT,
ETL_METASTORE_PORT) on a topic, ZooKeeper root, warehouse dir and Hive table of its own.
The kill loop is tests/crash_harness.kill_campaign, the same as tests/test_crash.py's random
test: a normal run is timed first, then each run is SIGKILLed (its whole process tree) after
a delay drawn from [0, 1.2 x that], more records are produced now and then, and the invariants
that must hold at any moment are checked after every kill. Every --oracle-every kills, and at
the end, the job is recovered (`etl recover` when it exists, then `etl run`) and the full
oracle runs: every produced (topic, partition, offset) exactly once in the table plus its
_rejected table, files tiling the offsets, ZooKeeper consistent, no temp file, and
`etl verify --deep` exit 0.

Prints every kill (delay, batch state in ZooKeeper, interrupted step) and a summary. Exit 0
when everything held, 1 on any loss, duplicate or broken invariant (the work dir is kept then),
2 on bad arguments. Replay a run with the same --seed (kill delays depend only on the seed).
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import traceback
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

import crash_harness as h  # noqa: E402
from kafka_helpers import produce  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=2000, help="SIGKILLs to land (default 2000)")
    parser.add_argument("--seed", type=int, default=int(time.time()), help="random seed (default: the time)")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--max-records", type=int, default=50, help="[job] max_records_per_partition (default 50)")
    parser.add_argument("--initial", type=int, default=150, help="records per partition before the first run")
    parser.add_argument("--oracle-every", type=int, default=100, metavar="N",
                        help="recover and run the full oracle every N kills (0: only at the end; default 100)")
    parser.add_argument("--hive-check-every", type=int, default=1, metavar="N",
                        help="read the table through Hive in the per-kill check after every N-th run (default 1)")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="where the warehouse and logs go (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the topic, ZooKeeper root, tables and files")
    args = parser.parse_args(argv)
    if args.kills < 1 or args.partitions < 1 or args.max_records < 1:
        parser.error("--kills, --partitions and --max-records must be at least 1")
    return args


def spark_session(metastore_uri: str, warehouse_url: str):
    from pyspark.sql import SparkSession
    return (SparkSession.builder.master("local[1]").appName("etl-soak-oracle")
            .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
            .config("spark.hadoop.hive.metastore.uris", metastore_uri)
            .config("spark.sql.warehouse.dir", warehouse_url)
            .enableHiveSupport().getOrCreate())


def main(argv=None) -> int:
    args = parse_args(argv)
    env = os.environ
    zk_hosts = f"127.0.0.1:{env.get('ETL_ZK_PORT', '2181')}"
    bootstrap = f"127.0.0.1:{env.get('ETL_KAFKA_PORT', '9092')}"
    metastore = f"thrift://127.0.0.1:{env.get('ETL_METASTORE_PORT', '9083')}"
    for port in (zk_hosts, bootstrap, metastore):
        if not h.port_open(int(port.rsplit(":", 1)[1])):
            print(f"soak: nothing listens on {port}; start the local stack with scripts/local-stack up",
                  file=sys.stderr)
            return 2

    tag = uuid.uuid4().hex[:8]
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix=f"etl-soak-{tag}-"))
    workdir.mkdir(parents=True, exist_ok=True)
    warehouse_dir, topic, table = workdir / "warehouse", f"etl-soak-{tag}", f"soak_{tag}"
    zk_root = f"/etl-soak/{tag}"
    started = time.monotonic()
    print(f"soak: seed {args.seed}, {args.kills} kills; topic {topic}, table etl_test.{table}, ZooKeeper "
          f"{zk_root}, work dir {workdir}", flush=True)

    from confluent_kafka.admin import AdminClient, NewTopic
    from kazoo.client import KazooClient
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=args.partitions, replication_factor=1)])[topic].result(60)
    zk = KazooClient(hosts=zk_hosts, timeout=10)
    zk.start(timeout=30)
    config = h.write_config(workdir / "etl.ini", job_name=f"soak-{tag}", topics=topic, kafka_bootstrap=bootstrap,
                            zk_hosts=zk_hosts, zk_root=zk_root, warehouse_dir=warehouse_dir, metastore=metastore,
                            table=table, job={"max_records_per_partition": args.max_records})
    spark = None
    ok = False
    try:
        deadline = time.monotonic() + 60
        while len(admin.list_topics(topic, timeout=10).topics[topic].partitions) != args.partitions:
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {topic} not ready")
            time.sleep(0.2)
        source = h.DataSource(topic, args.partitions, lambda t, v: produce(t, v, bootstrap=bootstrap))
        source.produce(args.initial)
        spark = spark_session(metastore, f"file://{warehouse_dir}")
        read = h.hive_reader(spark)
        baseline = h.run_etl(config)
        if baseline.returncode != 0:
            print(f"soak: the baseline run failed\n{baseline.describe()}", file=sys.stderr)
            return 1
        print(f"soak: baseline run {baseline.seconds:.1f}s", flush=True)

        def checkpoint(kills_so_far: int) -> None:
            final = h.recover_or_run(config)
            oracle = h.check_exactly_once(read, config, source.expected, warehouse_dir)
            print(f"soak: after {kills_so_far} kills: recovered in {final.seconds:.1f}s; {oracle.describe()}",
                  flush=True)

        campaign = h.kill_campaign(config, zk, source, warehouse_dir, kills=args.kills, seed=args.seed,
                                   baseline_seconds=baseline.seconds, read_table=read,
                                   min_backlog=args.initial * args.partitions,
                                   max_backlog=2 * args.initial * args.partitions,
                                   log=lambda line: print(line, flush=True),
                                   every=args.oracle_every, checkpoint=checkpoint,
                                   hive_check_every=args.hive_check_every)
        final = h.recover_or_run(config)
        oracle = h.check_exactly_once(read, config, source.expected, warehouse_dir)
        print("\n" + campaign.summary())
        print(f"soak: final recovery {final.seconds:.1f}s; {oracle.describe()}")
        print(f"soak: PASSED in {time.monotonic() - started:.0f}s (seed {args.seed})")
        ok = True
        return 0
    except AssertionError as exc:
        print(f"\nsoak: FAILED (seed {args.seed}): {exc}", file=sys.stderr)
        print(f"soak: work dir kept for inspection: {workdir} (config {config})", file=sys.stderr)
        return 1
    except Exception:
        traceback.print_exc()
        print(f"soak: ERROR (seed {args.seed}); work dir kept: {workdir}", file=sys.stderr)
        return 1
    finally:
        if spark is not None and ok and not args.keep:
            for name in (table, f"{table}_rejected"):
                spark.sql(f"DROP TABLE IF EXISTS etl_test.`{name}`")
        if spark is not None:
            spark.stop()
        if ok and not args.keep:
            zk.delete(zk_root, recursive=True)
            for future in admin.delete_topics([topic]).values():
                try:
                    future.result(30)
                except Exception:
                    pass
            shutil.rmtree(workdir, ignore_errors=True)
        zk.stop()
        zk.close()


if __name__ == "__main__":
    sys.exit(main())
