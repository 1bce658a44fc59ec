"""What the pipeline tests share: running the job, reading the Hive table back, records."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ETL = str(Path(sys.executable).with_name("etl"))


def event(i: int) -> bytes:
    return json.dumps({"event_id": i, "user_id": f"u{i % 7}", "action": "click", "amount": i / 10,
                       "ts": "2026-11-21 10:00:00", "ok": i % 2 == 0}).encode()


def events_by_partition(partitions: int, per_partition: int, first_id: int = 0) -> dict[int, list[bytes]]:
    return {p: [event(first_id + p * per_partition + i) for i in range(per_partition)] for p in range(partitions)}


def loaded_job(new_topic, produce, write_config, partitions=2, per_partition=50, **sections) -> tuple[str, Path]:
    """A new topic with `per_partition` events in each partition, loaded by one run of the job
    that write_config(**sections) describes: (topic, config path)."""
    from etl.config import load_config
    from etl.job.runner import run_job

    topic = new_topic(partitions=partitions)
    produce(topic, events_by_partition(partitions, per_partition))
    config = write_config(kafka={"topics": topic}, **sections)
    assert run_job(load_config(config)) == 0
    return topic, config


def run_etl(config: Path, *args: str, fault: str | None = None, timeout: float = 240) -> subprocess.CompletedProcess:
    """`etl run` in its own process group (so a fault point can SIGKILL the whole job)."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    env.pop("ETL_FAULT_POINT", None)
    if fault:
        env["ETL_FAULT_POINT"] = fault
    return subprocess.run([ETL, "run", "--config", str(config), *args], env=env, capture_output=True,
                          text=True, timeout=timeout, start_new_session=True)


def etl_command(config: Path, command: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([ETL, command, "--config", str(config), *args], capture_output=True, text=True,
                          timeout=timeout, start_new_session=True)


def table_offsets(spark, database: str, table: str) -> Counter:
    """How many times each (topic, partition, offset) is in the Hive table, read through Hive."""
    spark.sql(f"REFRESH TABLE `{database}`.`{table}`")
    rows = spark.sql(f"SELECT kafka_topic, kafka_partition, kafka_offset FROM `{database}`.`{table}`").collect()
    return Counter((r[0], r[1], r[2]) for r in rows)


def expected_offsets(topic: str, counts: dict[int, int], start: int = 0) -> Counter:
    return Counter({(topic, p, o): 1 for p, n in counts.items() for o in range(start, n)})


def lock_znode(config: Path | str) -> str:
    from etl.config import load_config
    from etl.state.store import ZkPaths
    loaded = load_config(config)
    return ZkPaths(loaded.zookeeper.root, loaded.job.name).lock


def wait_for_lock_release(zk, config: Path | str, timeout: float = 60) -> float:
    """Wait until a killed run's ephemeral lock is gone (its session expired); return seconds."""
    import time

    lock = lock_znode(config)
    started = time.monotonic()
    while zk.exists(lock):
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"lock {lock} still held after {timeout}s")
        time.sleep(0.1)
    return time.monotonic() - started
