"""One benchmark run: its names, its work folder, the shared Spark session, the load gate,
what it created (to clean up), and the report it fills in."""
from __future__ import annotations

import os
import platform
import shutil
import time
import uuid
from pathlib import Path

from confluent_kafka.admin import AdminClient
from kazoo.client import KazooClient

from tests.harness import kafka
from tests.harness.config_file import JobTuning, write_config
from tests.harness.stack import Stack
from tests.perf.common import SCHEMAS, WORK_ROOT, ZK_BENCH_ROOT, say
from tests.perf.load import LoadGate, Monitor, loadavg
from tests.perf.spark_tasks import warm_task


def memory_gib() -> float:
    """The machine's RAM (MemTotal), for the report and the charts' footnotes."""
    with open("/proc/meminfo") as f:
        kib = next(int(line.split()[1]) for line in f if line.startswith("MemTotal:"))
    return round(kib / 2**20, 1)


def zk_client(stack: Stack) -> KazooClient:
    client = KazooClient(hosts=stack.zk_hosts, timeout=10)
    client.start(timeout=15)
    return client


class BenchRun:
    """What the measurements share; each workload module is a function of it."""

    def __init__(self, args, stack: Stack):
        self.args, self.stack = args, stack
        self.run_id = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}"
        self.work = WORK_ROOT / self.run_id
        self.zk_root = f"{ZK_BENCH_ROOT}/{self.run_id}"
        # One database for all benchmark runs, tables named per run and dropped after it: the
        # local metastore cannot drop a database (DROP DATABASE dies on a missing BoneCP class).
        self.database = "etl_bench"
        self.tables: list[str] = []
        self.gate = LoadGate(args.load_threshold, args.max_wait)
        self.topics: list[str] = []
        self.spark, self.spark_parallelism = None, None
        self.session_spark: dict[str, str] = {}  # [spark] settings the shared session adds (spark.jars)
        self.admin = AdminClient({"bootstrap.servers": stack.kafka_bootstrap})  # must outlive its futures
        self.last_full_config = None  # the last full batch's config: the fixed cost runs it again
        self.report: dict = {"run_id": self.run_id, "host": self.host_facts()}

    def host_facts(self) -> dict:
        import pyarrow
        import pyspark
        import confluent_kafka
        return {"cpus": os.cpu_count(), "python": platform.python_version(), "pyspark": pyspark.__version__,
                "pyarrow": pyarrow.__version__, "confluent_kafka": confluent_kafka.version()[0],
                "librdkafka": confluent_kafka.libversion()[0], "memory_gib": memory_gib(),
                "loadavg_at_start": list(loadavg())}

    def ini(self, label: str, topics: list[str], decoder: str, max_records: int, hive: dict | None = None,
            registry_url: str | None = None, parallelism: int | None = None, kafka_extra: dict | None = None,
            spark_extra: dict | None = None, sections: dict | None = None, **job_extra) -> Path:
        """The job's INI for one measurement: the bench's own tuning (ZooKeeper session 10 s,
        rejected ratio 0.01, Kafka fetch timeout 30 s, retries up to 2 s, local[P]; P is --parallelism
        unless given). `sections`: more sections, or keys of them, as write_config takes them."""
        table = self.table_of(label)
        self.tables.append(table)
        tuning = JobTuning(session_timeout_seconds=10, max_rejected_ratio=0.01, fetch_timeout_seconds=30,
                           retry_max_wait_seconds=2, parallelism=parallelism or self.args.parallelism,
                           max_records_per_partition=max_records, decoder=decoder)
        return write_config(self.work / f"{label}.ini", self.stack, job_name=f"bench-{label}",
                            zk_root=f"{self.zk_root}/{label}", warehouse_dir=self.work / "warehouse",
                            table=table, tuning=tuning, database=self.database, schema=SCHEMAS[decoder],
                            kafka={"topics": ",".join(topics), **(kafka_extra or {})}, job=job_extra,
                            **({"hive": hive} if hive else {}), **({"spark": spark_extra} if spark_extra else {}),
                            **({"schema_registry": {"url": registry_url}} if registry_url else {}),
                            **(sections or {}))

    def table_of(self, label: str) -> str:
        """The table of the measurement `label` (dropped after the run, with its rejected table)."""
        return f"b{self.run_id[-6:]}_{label.replace('-', '_')}"

    def start_spark(self, parallelism: int | None = None) -> None:
        """One session at a time, built the way the job builds it, at local[parallelism]
        (default --parallelism); run_job's getOrCreate then finds it, so no measurement pays
        the Spark start-up. Another parallelism stops the session and starts a new one."""
        parallelism = parallelism or self.args.parallelism
        if self.spark is not None and self.spark_parallelism == parallelism:
            return
        from etl.config import load_config
        from etl.hive.spark import build_spark
        if self.spark is not None:
            self.spark.stop()
        config = load_config(self.ini(f"session-p{parallelism}", ["unused"], "json", 1, parallelism=parallelism,
                                      spark_extra=self.session_spark))
        started = time.monotonic()
        self.spark, self.spark_parallelism = build_spark(config), parallelism
        self.report.setdefault("bench_spark_session_start_s", time.monotonic() - started)
        say(f"Spark session local[{parallelism}] up in {time.monotonic() - started:.1f}s")
        started = time.monotonic()
        self.spark.sql("SHOW DATABASES").collect()  # the Hive client connects once, outside any timing
        say(f"metastore client connected in {time.monotonic() - started:.1f}s")
        started = time.monotonic()
        pids = self.spark.sparkContext.parallelize(range(parallelism * 2), parallelism * 2) \
            .map(warm_task).collect()
        say(f"Python workers warmed up in {time.monotonic() - started:.1f}s (pids {sorted(set(pids))})")

    def new_topic(self, partitions: int, label: str) -> str:
        topic = f"bench-{self.run_id}-{label}"
        kafka.create_topic(self.admin, topic, partitions, timeout=60.0)
        self.topics.append(topic)
        return topic

    def delete_topic(self, topic: str) -> None:
        """Delete a topic at once (the broker holds topics in memory) and forget it."""
        self._say_problems(kafka.delete_topics(self.admin, [topic]))
        self.topics.remove(topic)

    @staticmethod
    def _say_problems(problems: list[str]) -> None:
        for problem in problems:  # the broker keeps topics in memory only; a leftover is harmless
            say(f"could not delete a topic: {problem}")

    def cleanup(self) -> None:
        if self.args.keep:
            say(f"kept: topics {self.topics}, ZooKeeper {self.zk_root}, Hive database {self.database}, {self.work}")
            return
        self._say_problems(kafka.delete_topics(self.admin, self.topics))
        try:
            client = zk_client(self.stack)
            client.delete(self.zk_root, recursive=True)
            client.stop()
            client.close()
        except Exception as exc:
            say(f"could not delete {self.zk_root}: {exc}")
        if self.spark is not None:
            try:
                self.spark.sql("SHOW DATABASES").collect()  # reconnects an idle metastore client first
                for table in self.tables:
                    for name in (table, f"{table}_rejected"):
                        self.spark.sql(f"DROP TABLE IF EXISTS `{self.database}`.`{name}`")
            except Exception as exc:
                say(f"could not drop the Hive tables of this run: {str(exc).splitlines()[0]}")
        shutil.rmtree(self.work, ignore_errors=True)

    def measure(self, what: str, fn, workers: bool = False, tree: bool = False) -> tuple[object, dict]:
        gate = self.gate.wait(what)
        with Monitor(sample_workers=workers, sample_tree=tree) as monitor:
            result = fn()
        stats = {**monitor.to_json(), "quiet_before": gate["quiet"]}
        say(f"{what}: {monitor.seconds:.2f}s (load {monitor.load_before[0]:.2f}; CPU cores used by this benchmark "
            f"{monitor.own_cores:.2f}, the local stack {monitor.stack_cores:.2f}, other processes "
            f"{monitor.foreign_cores:.2f})" + (f", peak worker RSS {monitor.peak_worker_rss / 2**20:.0f} MB"
                                                      if workers else ""))
        return result, stats

    # -- 1 + 2 + 3: throughput -----------------------------------------------------------------
