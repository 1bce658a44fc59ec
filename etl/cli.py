"""The `etl` command. Parses arguments and the config, then hands over to the package.

Exit codes: 0 success (or the lock is held by another run), 1 the batch failed and is left
for the next run to resume, 2 usage or config error (nothing was touched).
"""
from __future__ import annotations

import argparse
import json
import logging
import sys

from etl import faults
from etl.config import Config, load_config
from etl.errors import EXIT_OK, EtlError
from etl.kafka_source import KafkaMetadata
from etl.zk_store import ZkStateStore

log = logging.getLogger("etl")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    faults.arm()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = load_config(args.config)
        return args.command(config, args)
    except EtlError as exc:
        print(f"etl: error: {exc}", file=sys.stderr)
        return exc.exit_code


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="etl", description="Exactly-once Kafka to Hive ETL")
    commands = parser.add_subparsers(required=True, metavar="COMMAND")
    run = commands.add_parser("run", help="load new Kafka records into the Hive table")
    run.add_argument("--config", required=True)
    run.add_argument("--loop", action="store_true", help="keep running, sleeping --interval when caught up")
    run.add_argument("--interval", type=_positive_float, default=60.0, metavar="SECONDS")
    run.add_argument("--max-batches", type=_positive_int, default=None, metavar="N")
    run.set_defaults(command=cmd_run)
    status = commands.add_parser("status", help="committed offsets, lag and the last batch")
    status.add_argument("--config", required=True)
    status.add_argument("--json", action="store_true")
    status.set_defaults(command=cmd_status)
    return parser


def _positive_int(raw: str) -> int:
    value = int(raw)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be greater than 0")
    return value


def _positive_float(raw: str) -> float:
    value = float(raw)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be greater than 0")
    return value


def cmd_run(config: Config, args) -> int:
    from etl.runner import run_job
    return run_job(config, loop=args.loop, interval=args.interval, max_batches=args.max_batches)


def cmd_status(config: Config, args) -> int:
    from etl.status import collect_status, render_status
    with ZkStateStore(config.zookeeper, config.job.name, config.retry) as store:
        kafka = KafkaMetadata(config.kafka, config.retry, config.job.name)
        try:
            status = collect_status(config, store, kafka)
        finally:
            kafka.close()
    print(json.dumps(status, indent=2) if args.json else render_status(status))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
