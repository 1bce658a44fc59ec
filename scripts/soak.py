#!/usr/bin/env python
"""Soak the exactly-once guarantee: thousands of random SIGKILLs of `etl run`, then the oracle.

    .venv/bin/python scripts/soak.py --kills 2000 --seed 7

Runs against the local stack (scripts/local-stack up; ports from ETL_ZK_PORT, ETL_KAFKA_PORT,
ETL_METASTORE_PORT) on a topic, ZooKeeper root, warehouse dir and Hive table of its own.
The kill loop is tests.harness.campaign.kill_campaign, the same as tests/integration/test_crash.py's
random test: a normal run is timed first, then each run is SIGKILLed (its whole process tree) after
a delay drawn from [0, 1.2 x that], more records are produced now and then, and the invariants
that must hold at any moment are checked after every kill. Every --oracle-every kills, and at
the end, the job is recovered (`etl recover` when it exists, then `etl run`) and the full
oracle runs: every produced (topic, partition, offset) exactly once in the table plus its
_rejected table, files tiling the offsets, ZooKeeper consistent, no temp file, and
`etl verify --deep` exit 0.

Prints every kill (delay, batch state in ZooKeeper, interrupted step) and a summary. Exit 0
when everything held, 1 on any loss, duplicate or broken invariant (the work dir is kept then),
2 on bad arguments. Replay a run with the same --seed (kill delays depend only on the seed).

The work lives in tests/harness/soak.py; this script is its command line.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

# The repository root, once, so that tests.harness imports as the package it is (tests/ itself
# never goes on the path).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.harness.soak import SoakOptions, soak  # noqa: E402  (needs the path above)


def parse_args(argv: list[str]) -> SoakOptions:
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
    return SoakOptions(args.kills, args.seed, args.partitions, args.max_records, args.initial, args.oracle_every,
                       args.hive_check_every, args.workdir, args.keep)


if __name__ == "__main__":
    sys.exit(soak(parse_args(sys.argv[1:])))
