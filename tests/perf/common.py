"""What every part of the benchmark shares: where it works, how it talks, how it sums up."""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Mapping

from etl.config import DecoderKind
from tests.harness.paths import ETL as ETL_CLI
from tests.harness.paths import REPO

# Avro and Protobuf carry the JSON events' logical content (tests/perf/formats.py): one table.
SCHEMAS = {DecoderKind.JSON: REPO / "warehouse_schema" / "events.sql",
           DecoderKind.ACCESS_LOG: REPO / "warehouse_schema" / "access_log.sql",
           DecoderKind.AVRO: REPO / "warehouse_schema" / "events.sql",
           DecoderKind.PROTOBUF: REPO / "warehouse_schema" / "events.sql"}
ZK_BENCH_ROOT = "/etl-bench"
WORK_ROOT = Path(os.environ.get("ETL_BENCH_DIR", "/tmp/kafka-hive-etl-bench"))
MB = 1_000_000
# librdkafka's own consumer defaults where etl.source.kafka.READ_TUNING departs from them: the
# bench runs the drain, the full batch and the seeds' shape with these too, to show the tuning.
LIBRDKAFKA_DEFAULTS = {"fetch.queue.backoff.ms": "1000"}


def spread(records: int, partitions: int) -> list[int]:
    """`records` over `partitions` as evenly as they go: the first ones one more."""
    return [records // partitions + (1 if p < records % partitions else 0) for p in range(partitions)]


def say(message: str) -> None:
    """Progress goes to stderr, so that --json on stdout stays one clean object."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def summarize(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "runs": values}


def rate(records: int, nbytes: int, seconds: float) -> dict:
    return {"records_per_s": records / seconds if seconds else None,
            "mb_per_s": nbytes / MB / seconds if seconds else None}


def etl_run_json(ini, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:
    """One whole `etl run --json` process of the job `ini`, as a schedule starts it, with `env`
    added to this process's environment; an error if it fails."""
    done = subprocess.run([ETL_CLI, "run", "--json", "--config", str(ini)],
                          env={**os.environ, "PYSPARK_PYTHON": sys.executable, **(env or {})},
                          capture_output=True, text=True,
                          timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"etl run --config {ini} exited {done.returncode}:\n{done.stdout[-2000:]}\n"
                           f"{done.stderr[-3000:]}")
    return done
