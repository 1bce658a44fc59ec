"""Services that stop answering: private brokers and metastores a test may SIGSTOP without
breaking anyone else's tests on the shared stack, and reading their tables back."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Iterable

from tests.harness.etl_process import FAULT_ENV, die_with_us
from tests.harness.kills import CLEANUP, sigkill
from tests.harness.paths import REPO
from tests.harness.ports import free_port, port_open


def stop_roles(procs: dict[str, subprocess.Popen], roles: Iterable[str]) -> None:
    """Stop the daemons of `roles`, in that order (TERM, then KILL after 30 s), and forget them.
    A SIGSTOPped one is continued first: a stopped JVM cannot act on TERM."""
    for role in roles:
        proc = procs.pop(role, None)
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                sigkill(proc.pid, role, purpose=CLEANUP)
                proc.wait(30)


class paused:
    """`with paused(pid):` SIGSTOP a process and always SIGCONT it on the way out."""

    def __init__(self, pid: int):
        self.pid = pid
        self.stopped_at: float | None = None

    def __enter__(self) -> "paused":
        os.kill(self.pid, signal.SIGSTOP)
        self.stopped_at = time.monotonic()
        return self

    def resume(self) -> None:
        if self.stopped_at is not None:
            os.kill(self.pid, signal.SIGCONT)
            self.stopped_at = None

    def __exit__(self, *exc) -> None:
        self.resume()


class _Service:
    """A private service process for tests that must stop it without breaking anyone else's
    tests on the shared stack (SIGSTOP of the shared broker or metastore would)."""

    name = "service"
    what = "private service"  # in the suite's report of SIGKILLs (tests/harness/kills.py)

    def __init__(self, workdir: Path):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.log_path = self.workdir / f"{self.name}.log"
        self.proc: subprocess.Popen | None = None

    def command(self) -> list[str]:
        raise NotImplementedError

    def start(self, timeout: float = 180) -> "_Service":
        with open(self.log_path, "ab") as logfile:
            self.proc = subprocess.Popen(die_with_us(self.command()), cwd=self.workdir, stdout=logfile, stderr=logfile,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while not port_open(self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"private {self.name} did not listen on {self.port}:\n"
                                   f"{self.log_path.read_text(errors='replace')[-3000:]}")
            time.sleep(0.2)
        return self

    @property
    def pid(self) -> int:
        return self.proc.pid

    def kill(self) -> None:
        """SIGKILL the service, as a lost machine would; start() runs it again on the same
        ports and folder (a Kafka broker recovers its log from there)."""
        if self.proc is not None and self.proc.poll() is None:
            sigkill(self.proc.pid, self.what)
            self.proc.wait(20)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)  # a stopped process cannot act on TERM
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                sigkill(self.proc.pid, self.what, purpose=CLEANUP)
                self.proc.wait(20)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class PrivateBroker(_Service):
    """An Apache Kafka broker of the test's own (one KRaft node, its log in the test's folder),
    on free ports, with the shared broker's settings (scripts/stack/kafka-node). `extra`: a
    properties file whose lines are added to (and win over) those settings, e.g. more listeners
    (tests/harness/secure_kafka.py); `jvm_opts`: more JVM options (KAFKA_JVM_OPTS), e.g. a
    smaller heap; `jars`: the release's jars under .stack/jars (KAFKA_JARS: kafka, the shared
    broker's 4.4, or kafka-3.9). Its PLAINTEXT listener, `bootstrap`, stays."""

    name = "kafka"
    what = "Kafka broker"

    def __init__(self, workdir: Path, extra: Path | None = None, jvm_opts: str | None = None, jars: str = "kafka"):
        super().__init__(workdir)
        self.controller_port = free_port()
        self.extra, self.jvm_opts, self.jars = extra, jvm_opts, jars

    def command(self) -> list[str]:
        command = [str(REPO / "scripts" / "stack" / "kafka-node"), str(self.workdir / "node"), str(self.port),
                   str(self.controller_port), *([str(self.extra)] if self.extra else [])]
        settings = [f"KAFKA_JARS={self.jars}", *([f"KAFKA_JVM_OPTS={self.jvm_opts}"] if self.jvm_opts else [])]
        return ["env", *settings, *command]

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def create_topic(self, name: str, partitions: int) -> str:
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[name].result(60)
        deadline = time.monotonic() + 60
        while True:
            meta = admin.list_topics(name, timeout=10).topics.get(name)
            if meta is not None and meta.error is None and len(meta.partitions) == partitions:
                return name
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {name} not ready on the private broker")
            time.sleep(0.1)


class PrivateMetastore(_Service):
    """A standalone Hive metastore of the test's own (its own Derby DB), started like
    scripts/local-stack starts the shared one."""

    name = "metastore"
    what = "Hive metastore"

    def command(self) -> list[str]:
        import pyspark
        conf = self.workdir / "conf"
        conf.mkdir(exist_ok=True)
        (conf / "hive-site.xml").write_text(f"""<?xml version="1.0"?>
<configuration>
  <property><name>javax.jdo.option.ConnectionURL</name>
    <value>jdbc:derby:;databaseName={self.workdir}/metastore_db;create=true</value></property>
  <property><name>datanucleus.schema.autoCreateAll</name><value>true</value></property>
  <property><name>hive.metastore.schema.verification</name><value>false</value></property>
  <property><name>hive.metastore.warehouse.dir</name><value>file://{self.workdir}/hive-warehouse</value></property>
</configuration>
""")
        jars = Path(pyspark.__file__).parent / "jars"
        return ["java", "-Xmx512m",
                "-Dlog4j2.contextSelector=org.apache.logging.log4j.core.selector.BasicContextSelector",
                f"-Dlog4j.configurationFile={REPO / 'conf' / 'log4j2.properties'}",
                f"-Dderby.stream.error.file={self.workdir / 'derby.log'}",
                "-cp", f"{conf}:{jars}/*", "org.apache.hadoop.hive.metastore.HiveMetaStore", "-p", str(self.port)]

    @property
    def uri(self) -> str:
        return f"thrift://127.0.0.1:{self.port}"


_READ_TABLES = r"""
import json, os, sys
from pyspark.sql import SparkSession
uri, warehouse, db = sys.argv[1:4]
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
         .config("spark.hadoop.hive.metastore.uris", uri).config("spark.sql.warehouse.dir", warehouse)
         .enableHiveSupport().getOrCreate())
out = {}
for table in sys.argv[4:]:
    spark.sql(f"REFRESH TABLE `{db}`.`{table}`")
    rows = spark.sql(f"SELECT kafka_topic, kafka_partition, kafka_offset FROM `{db}`.`{table}`").collect()
    out[table] = [[r[0], r[1], r[2]] for r in rows]
print("ROWS " + json.dumps(out))
spark.stop()
"""


def read_tables_via(metastore_uri: str, warehouse_url: str, database: str, tables: Iterable[str]) -> dict:
    """{table: Counter of (topic, partition, offset)} read through Hive SQL in a separate
    Spark process connected to `metastore_uri` (the test's own session is bound to the shared
    metastore and Spark allows one session per process)."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    for key in FAULT_ENV:
        env.pop(key, None)
    result = subprocess.run(die_with_us([sys.executable, "-c", _READ_TABLES, metastore_uri, warehouse_url, database,
                                         *tables]),
                            capture_output=True, text=True, env=env, timeout=600, start_new_session=True)
    line = next((out for out in result.stdout.splitlines() if out.startswith("ROWS ")), None)
    if result.returncode != 0 or line is None:
        raise AssertionError(f"reading {tables} through {metastore_uri} failed (rc {result.returncode}):\n"
                             f"{result.stderr[-3000:]}")
    return {t: Counter(tuple(r) for r in rows) for t, rows in json.loads(line[5:]).items()}
