"""What registering a backfill's Hive partitions costs (issue 26, defect 10).

One batch of RECORDS records whose event times are spread over HOURS hourly partitions (the
issue's case: 5,000 records over 4,992 hours), loaded by the real job in this process with
[hive] partition_by = column:ts, on a fresh table each repeat; prints the seconds of each phase
and the median of the `register` phase (ALTER TABLE ... ADD and the location check).

  flock /tmp/etl-spark.lock .venv/bin/python -m tests.perf.partition_registration [--hours 4992]
      [--records 5000] [--repeat 3] [--json-out FILE]
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import tempfile
import uuid
from pathlib import Path

from tests.harness.config_file import JobTuning, write_config
from tests.harness.kafka import create_topic, produce
from tests.harness.stack import Stack, ensure_up
from tests.perf.phases import run_job_timed

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
START = dt.datetime(2020, 1, 1)


def values(records: int, hours: int) -> list[bytes]:
    """Record i at hour i % hours: every hour gets a record when records >= hours."""
    return [json.dumps({"event_id": i, "ts": f"{START + dt.timedelta(hours=i % hours):%Y-%m-%d %H:%M:%S}"}).encode()
            for i in range(records)]


def measure(stack: Stack, work: Path, records: int, hours: int, label: str) -> dict:
    from confluent_kafka.admin import AdminClient
    from etl.config import load_config
    topic = create_topic(AdminClient({"bootstrap.servers": stack.kafka_bootstrap}), f"reg-{label}", 1)
    produce(topic, {0: values(records, hours)}, bootstrap=stack.kafka_bootstrap)
    tuning = JobTuning(session_timeout_seconds=10, max_rejected_ratio=0.01, max_records_per_partition=records + 1)
    ini = write_config(work / f"{label}.ini", stack, job_name=f"reg-{label}", zk_root=f"/etl-perf-reg/{label}",
                       warehouse_dir=work / "warehouse", table=f"reg_{label.replace('-', '_')}", tuning=tuning,
                       kafka={"topics": topic}, hive={"partition_by": "column:ts"})
    phases, _out = run_job_timed(load_config(ini))
    return phases


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=5000)
    parser.add_argument("--hours", type=int, default=4992)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json-out")
    args = parser.parse_args()
    stack = ensure_up(Stack.from_environment())
    work = Path(tempfile.mkdtemp(prefix="etl-reg-bench-"))
    runs = []
    for rep in range(1, args.repeat + 1):
        label = f"{uuid.uuid4().hex[:6]}-{rep}"
        phases = measure(stack, work, args.records, args.hours, label)
        runs.append(phases)
        print(f"#{rep}: tasks {phases['tasks']:.2f}s register {phases['register']:.2f}s batch {phases['batch']:.2f}s",
              flush=True)
    result = {"records": args.records, "hours": args.hours, "runs": runs,
              "median": {k: statistics.median(r[k] for r in runs) for k in ("tasks", "register", "batch")}}
    print(f"median of {args.repeat}: register {result['median']['register']:.2f}s, tasks "
          f"{result['median']['tasks']:.2f}s, batch {result['median']['batch']:.2f}s")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
