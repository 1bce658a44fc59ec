"""The crash comparison's Flink job (scripts/bench.py --crash-compare --crash-peer flink|both): the
same seeded SIGKILL campaign (tests/perf/crash_compare.py) on Flink's job of tests/perf/flink_peer.py.

Flink's job runs as Flink jobs run, unbounded: a run never ends by itself. Each run is one JVM
(a local MiniCluster) started from the newest retained checkpoint, SIGKILLed (its whole process
group) at the seeded delay after its start or after its first record, then started again. The
baseline run and the final run are left running until every record produced so far is in its
finished files, then stopped with SIGTERM (not counted as kills); the baseline's time until then
sets the kill delays' range, as a clean run of the other jobs does.

What Flink has committed, against which missing and uncommitted offsets are counted: the offsets
its KafkaSource committed to the topic's consumer group, which it does when a checkpoint
completes (the same notification on which the FileSink publishes that checkpoint's files, so
the two may be apart by a moment). The readers are crash_compare's: Hive (an external table
over the folder, MSCK REPAIR TABLE before each read, as for the Spark peer), DuckDB's
`**/*.parquet` glob, and Spark reading the folder, which has no `_spark_metadata` and skips names
starting with '.' or '_', so that it reads exactly the FileSink's finished (committed) files.
After every run it also counts the FileSink's hidden files (`.part-*`: in progress, or closed
and pending a checkpoint's commit), which no reader sees and nothing removes after a kill.
"""
from __future__ import annotations

import os
import signal
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.harness.data import DataSource
from tests.harness.etl_process import EtlProcess
from tests.perf import flink_peer
from tests.perf.crash_compare import Committed, PeerProcess, read_hive
from tests.perf.peer_job import columns


@dataclass(frozen=True)
class FlinkMark:
    """Flink's files and checkpoints at one moment: completed (retained) checkpoint ids, the
    finished data files, and the hidden ones."""

    checkpoints: tuple[int, ...]
    files: frozenset[str]
    hidden: dict


def group_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict:
    """{(topic, partition): next offset} committed to Kafka for `group` (none: not in the dict)."""
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=15)
    finally:
        consumer.close()
    return {(tp.topic, tp.partition): tp.offset for tp in found if tp.offset >= 0}


class FlinkJob:
    """tests/perf/flink/.../KafkaToParquet.java unbounded, restarted from its retained checkpoints."""

    name = "Flink (FileSink)"

    def __init__(self, bootstrap: str, topic: str, work: Path, table: str, parallelism: int = 2,
                 partitions: int = 4):
        self.bootstrap, self.topic, self.table, self.partitions = bootstrap, topic, table, partitions
        self.folder, self.checkpoints = work / "output", work / "checkpoints"
        self.group = f"flink-peer-{topic}"  # the job's default group id (KafkaToParquet --group-id)
        self.argv = flink_peer.job_command(bootstrap, topic, self.folder, self.checkpoints, bounded=False,
                                           parallelism=parallelism)
        self.source: DataSource | None = None
        self.hidden_after: list[dict] = []  # per run: the hidden files after it, with the run's index

    def start(self) -> EtlProcess:
        return PeerProcess(self.argv)

    def _completed(self) -> tuple[int, ...]:
        if not self.checkpoints.exists():
            return ()
        return tuple(sorted(int(chk.name[4:]) for chk in self.checkpoints.glob("*/chk-*")
                            if (chk / "_metadata").is_file()))

    def _finished(self) -> frozenset[str]:
        if not self.folder.exists():
            return frozenset()
        return frozenset(str(p) for p in self.folder.rglob("part-*") if p.is_file())

    def mark(self) -> FlinkMark:
        return FlinkMark(self._completed(), self._finished(), flink_peer.hidden_files(self.folder))

    def work_started(self, proc: EtlProcess, mark: Any) -> bool:
        return '"first_record"' in proc.stdout

    def committed_ends(self) -> dict:
        return group_offsets(self.bootstrap, self.group, self.topic, self.partitions)

    def read_hive(self, spark, committed: Committed) -> tuple[tuple, str | None]:
        """An external table over the folder (once), then MSCK REPAIR TABLE and the read, as the
        Spark peer's users do."""
        self.folder.mkdir(parents=True, exist_ok=True)
        spark.sql(f"CREATE EXTERNAL TABLE IF NOT EXISTS {self.table} ({columns('json')}) "
                  f"PARTITIONED BY (dt STRING, hour STRING) STORED AS PARQUET LOCATION '{self.folder.as_uri()}'")
        return read_hive(spark, self.table, committed, repair=True)

    def after_run(self, proc: EtlProcess, killed: bool, mark: Any, produced: Counter) -> str:
        """Where the kill landed: before any record, before this run's first completed checkpoint,
        or after its n-th; the files it published and the hidden files left."""
        now = self.mark()
        self.hidden_after.append(now.hidden)
        new = [c for c in now.checkpoints if c not in mark.checkpoints]
        started = flink_peer.event(proc.stdout, "started") or {}
        restored = "restored" if started.get("restored_from") else "fresh"
        if '"first_record"' not in proc.stdout:
            where = "start-up, no record read yet"
        elif not new:
            where = "reading, before this run's first checkpoint completed"
        else:
            where = f"after {len(new)} completed checkpoint(s) of this run (last chk-{new[-1]})"
        hidden = now.hidden
        return (f"{restored}; {where}; {len(now.files - mark.files)} files published in this run; hidden .part "
                f"files now: {hidden['in_progress']} in progress or cut, {hidden['complete_pending']} closed "
                f"pending ({hidden['bytes']:,} bytes)")

    def run_until_caught_up(self, what: str, timeout: float = 600.0) -> float:
        """One run left running until its consumer group's offsets reach everything produced and its
        finished files hold as many distinct offsets as were produced, then stopped (SIGTERM);
        the seconds until it had caught up."""
        assert self.source is not None, "the campaign's source is set before the first run"
        ends, total = self.source.ends(), len(self.source.produced)
        proc = self.start()
        try:
            deadline = proc.started + timeout
            while True:
                if proc.poll() is not None:
                    raise AssertionError(f"{self.name}: {what} exited (rc {proc.returncode})\n{proc.describe()}")
                if time.monotonic() > deadline:
                    raise AssertionError(f"{self.name}: {what} did not catch up in {timeout:.0f}s\n{proc.describe()}")
                committed = self.committed_ends()
                if all(committed.get(key, 0) >= end for key, end in ends.items()) and self._distinct() >= total:
                    break
                time.sleep(0.5)
            seconds = time.monotonic() - proc.started
        finally:
            self._stop(proc)
        return seconds

    def _distinct(self) -> int:
        import duckdb
        files = sorted(self._finished())
        if not files:
            return 0
        listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
        with duckdb.connect() as db:
            row = db.sql(f"SELECT count(DISTINCT (kafka_partition, kafka_offset)) FROM read_parquet([{listed}])")
            return int(row.fetchall()[0][0])

    @staticmethod
    def _stop(proc: EtlProcess) -> None:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                proc.wait(30)
            except TimeoutError:  # wait() SIGKILLed it (CLEANUP) after 30 s: all was committed already
                pass
        proc.reap(2.0)
        proc.close()

    def baseline_run(self, source: DataSource) -> float:
        self.source = source
        return self.run_until_caught_up("the baseline run")

    def finish(self) -> float:
        return self.run_until_caught_up("the final run")
