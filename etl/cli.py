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
from etl.errors import EXIT_BATCH_FAILED, EXIT_OK, EtlError
from etl.source.kafka import KafkaMetadata
from etl.state.store import ZkStateStore

log = logging.getLogger("etl")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    faults.arm()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx2").setLevel(logging.WARNING)  # a line per Schema Registry request is noise
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
    verify = commands.add_parser("verify", help="check the warehouse against ZooKeeper; exit 0 only if all holds")
    verify.add_argument("--config", required=True)
    verify.add_argument("--deep", action="store_true", help="also read every row through Hive")
    verify.add_argument("--json", action="store_true")
    verify.set_defaults(command=cmd_verify)
    recover = commands.add_parser("recover", help="explain the state a crash left, then complete it")
    recover.add_argument("--config", required=True)
    recover.add_argument("--dry-run", action="store_true", help="say what would be done; change nothing")
    recover.add_argument("--accept-loss", action="store_true",
                         help="record committed ranges that no file covers and Kafka no longer holds as lost")
    recover.set_defaults(command=cmd_recover)
    reset = commands.add_parser("reset-offsets", help="move committed offsets, on the record")
    reset.add_argument("--config", required=True)
    reset.add_argument("--to", nargs="+", required=True, metavar="earliest|latest|TOPIC:PARTITION=OFFSET")
    reset.add_argument("--yes", action="store_true", help="apply; without it only show the changes")
    reset.add_argument("--move-aside", action="store_true",
                       help="backwards: move the committed files at and after the new offsets out of the table, "
                            "so that reloading them is exactly once (without it a backwards reset is refused)")
    reset.set_defaults(command=cmd_reset)
    bind = commands.add_parser("bind", help="move the job to the table and folders its config names now")
    bind.add_argument("--config", required=True)
    bind.add_argument("--yes", action="store_true", help="apply; without it only show the change")
    bind.add_argument("--data-moved", action="store_true",
                      help="the loaded files were moved to the new folders too: verify checks them there")
    bind.set_defaults(command=cmd_bind)
    compact = commands.add_parser("compact", help="merge the small files of finished Hive partitions, exactly once")
    compact.add_argument("--config", required=True)
    compact.add_argument("--partition", action="append", type=_partition, metavar="dt=YYYY-MM-DD/hour=HH",
                         help="compact this partition whether or not it is finished (repeatable)")
    compact.add_argument("--dry-run", action="store_true", help="say what would be compacted; change nothing")
    compact.add_argument("--json", action="store_true")
    compact.set_defaults(command=cmd_compact)
    schema = commands.add_parser("schema", help="compare the table with the writer schemas producers use")
    schema_commands = schema.add_subparsers(required=True, metavar="SUBCOMMAND")
    suggest = schema_commands.add_parser("suggest", help="print the DDL columns the latest writer schemas have "
                                                         "and the table lacks")
    suggest.add_argument("--config", required=True)
    suggest.add_argument("--json", action="store_true")
    suggest.set_defaults(command=cmd_schema_suggest)
    return parser


def _positive_int(raw: str) -> int:
    value = int(raw)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be greater than 0")
    return value


def _partition(raw: str) -> str:
    parts = raw.strip("/").split("/")
    if not all("=" in part and part.split("=", 1)[0] and part.split("=", 1)[1] for part in parts):
        raise argparse.ArgumentTypeError(f"{raw!r} is not a partition path such as dt=2026-11-22/hour=13")
    return "/".join(parts)


def _positive_float(raw: str) -> float:
    value = float(raw)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be greater than 0")
    return value


def cmd_run(config: Config, args) -> int:
    from etl.job.runner import run_job
    return run_job(config, loop=args.loop, interval=args.interval, max_batches=args.max_batches)


def cmd_status(config: Config, args) -> int:
    from etl.ops.status import collect_status, render_status
    with ZkStateStore(config.zookeeper, config.job.name, config.retry) as store:
        kafka = KafkaMetadata(config.kafka, config.retry, config.job.name)
        try:
            status = collect_status(config, store, kafka)
        finally:
            kafka.close()
    print(json.dumps(status, indent=2) if args.json else render_status(status))
    return EXIT_OK


def cmd_verify(config: Config, args) -> int:
    from etl.ops.verify import run_verify
    report = run_verify(config, deep=args.deep)
    print(json.dumps(report.to_json(), indent=2) if args.json else report.render())
    return EXIT_OK if report.ok else EXIT_BATCH_FAILED


def cmd_recover(config: Config, args) -> int:
    from etl.ops.recovery import recover
    return recover(config, dry_run=args.dry_run, accept_loss=args.accept_loss)


def cmd_reset(config: Config, args) -> int:
    from etl.ops.reset import reset_offsets
    return reset_offsets(config, args.to, yes=args.yes, move_aside=args.move_aside)


def cmd_bind(config: Config, args) -> int:
    from etl.ops.rebind import bind
    return bind(config, yes=args.yes, data_moved=args.data_moved)


def cmd_compact(config: Config, args) -> int:
    from etl.ops.compact import run_compact
    return run_compact(config, args.partition, dry_run=args.dry_run, as_json=args.json)


def cmd_schema_suggest(config: Config, args) -> int:
    from etl.ops.schema_suggest import render, suggest
    suggestions = suggest(config)
    print(json.dumps([s.to_json() for s in suggestions], indent=2) if args.json else render(suggestions, config))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
