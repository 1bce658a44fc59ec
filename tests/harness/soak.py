"""The soak of the exactly-once guarantee behind scripts/soak.py: thousands of random SIGKILLs
of `etl run` (campaign.kill_campaign, as tests/integration/test_crash.py's random test), the
full oracle every so many kills and at the end."""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
import traceback
import uuid
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import AdminClient
from kazoo.client import KazooClient

from tests.harness import kafka
from tests.harness.campaign import kill_campaign
from tests.harness.config_file import JobTuning, write_config
from tests.harness.data import DataSource
from tests.harness.etl_process import run_etl
from tests.harness.oracle import check_exactly_once, hive_reader
from tests.harness.recovery import recover_or_run
from tests.harness.stack import Stack, silent_services

# A dead run's lock goes quickly (the server's minimum session), and Spark starts faster.
SOAK_TUNING = JobTuning(session_timeout_seconds=4, max_rejected_ratio=0.5)
NEEDED = {"ZooKeeper": True, "Kafka": True, "metastore": True}


@dataclass(frozen=True)
class SoakOptions:
    kills: int
    seed: int
    partitions: int
    max_records: int  # [job] max_records_per_partition
    initial: int  # records per partition before the first run
    oracle_every: int  # recover and run the full oracle every N kills (0: only at the end)
    hive_check_every: int  # read the table through Hive in the per-kill check after every N-th run
    workdir: Path | None
    keep: bool


def spark_session(metastore_uri: str, warehouse_url: str):
    from pyspark.sql import SparkSession
    return (SparkSession.builder.master("local[1]").appName("etl-soak-oracle")
            .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
            .config("spark.hadoop.hive.metastore.uris", metastore_uri)
            .config("spark.sql.warehouse.dir", warehouse_url)
            .enableHiveSupport().getOrCreate())


def soak(options: SoakOptions) -> int:
    """0 when everything held, 1 on any loss, duplicate or broken invariant (the work dir is
    kept then), 2 when the local stack does not answer."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    stack = Stack.from_environment()
    silent = silent_services(stack, NEEDED)
    if silent:
        print(f"soak: {', '.join(silent)} does not answer; start the local stack with scripts/local-stack up",
              file=sys.stderr)
        return 2
    tag = uuid.uuid4().hex[:8]
    workdir = options.workdir or Path(tempfile.mkdtemp(prefix=f"etl-soak-{tag}-"))
    workdir.mkdir(parents=True, exist_ok=True)
    warehouse_dir, topic, table = workdir / "warehouse", f"etl-soak-{tag}", f"soak_{tag}"
    zk_root = f"/etl-soak/{tag}"
    print(f"soak: seed {options.seed}, {options.kills} kills; topic {topic}, table etl_test.{table}, ZooKeeper "
          f"{zk_root}, work dir {workdir}", flush=True)
    admin = AdminClient({"bootstrap.servers": stack.kafka_bootstrap})
    kafka.create_topic(admin, topic, options.partitions, timeout=60)
    zk = KazooClient(hosts=stack.zk_hosts, timeout=10)
    zk.start(timeout=30)
    config = write_config(workdir / "etl.ini", stack, job_name=f"soak-{tag}", zk_root=zk_root,
                          warehouse_dir=warehouse_dir, table=table, tuning=SOAK_TUNING,
                          kafka={"topics": topic}, job={"max_records_per_partition": options.max_records})
    spark, ok = None, False
    try:
        spark = spark_session(stack.metastore_uri, f"file://{warehouse_dir}")
        ok = _campaign(options, stack, config, zk, topic, warehouse_dir, spark)
        return 0 if ok else 1
    except AssertionError as exc:
        print(f"\nsoak: FAILED (seed {options.seed}): {exc}", file=sys.stderr)
        print(f"soak: work dir kept for inspection: {workdir} (config {config})", file=sys.stderr)
        return 1
    except Exception:
        traceback.print_exc()
        print(f"soak: ERROR (seed {options.seed}); work dir kept: {workdir}", file=sys.stderr)
        return 1
    finally:
        if spark is not None and ok and not options.keep:
            for name in (table, f"{table}_rejected"):
                spark.sql(f"DROP TABLE IF EXISTS etl_test.`{name}`")
        if spark is not None:
            spark.stop()
        if ok and not options.keep:
            zk.delete(zk_root, recursive=True)
            for problem in kafka.delete_topics(admin, [topic]):
                print(f"soak: could not delete the topic: {problem}", file=sys.stderr)
            shutil.rmtree(workdir, ignore_errors=True)
        zk.stop()
        zk.close()


def _campaign(options: SoakOptions, stack: Stack, config: Path, zk, topic: str, warehouse_dir: Path,
              spark) -> bool:
    """The baseline run, the kills with their checkpoints, the final recovery and oracle."""
    started = time.monotonic()
    source = DataSource(topic, options.partitions,
                        lambda t, v: kafka.produce(t, v, bootstrap=stack.kafka_bootstrap))
    source.produce(options.initial)
    read = hive_reader(spark)
    baseline = run_etl(config)
    if baseline.returncode != 0:
        print(f"soak: the baseline run failed\n{baseline.describe()}", file=sys.stderr)
        return False
    print(f"soak: baseline run {baseline.seconds:.1f}s", flush=True)

    def checkpoint(kills_so_far: int) -> None:
        final = recover_or_run(config)
        oracle = check_exactly_once(read, config, source.expected, warehouse_dir)
        print(f"soak: after {kills_so_far} kills: recovered in {final.seconds:.1f}s; {oracle.describe()}",
              flush=True)

    campaign = kill_campaign(config, zk, source, warehouse_dir, kills=options.kills, seed=options.seed,
                             baseline_seconds=baseline.seconds, read_table=read,
                             min_backlog=options.initial * options.partitions,
                             max_backlog=2 * options.initial * options.partitions,
                             log=lambda line: print(line, flush=True),
                             every=options.oracle_every, checkpoint=checkpoint,
                             hive_check_every=options.hive_check_every)
    final = recover_or_run(config)
    oracle = check_exactly_once(read, config, source.expected, warehouse_dir)
    print("\n" + campaign.summary())
    print(f"soak: final recovery {final.seconds:.1f}s; {oracle.describe()}")
    print(f"soak: PASSED in {time.monotonic() - started:.0f}s (seed {options.seed})")
    return True
