"""The `etl` command. Parses arguments and the config, then hands over to the package.

Exit codes: etl.errors.EXIT_CODES, listed by `etl --help`. An exception that is not the ETL's
own is a bug or an unforeseen failure and ends with its traceback (exit 1), except the transient
ones of ZooKeeper's client and the network (_TRANSIENT), which exit 75 like Retryable errors.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import textwrap
from importlib import metadata

from kazoo.handlers.threading import KazooTimeoutError

from etl import faults, logs
from etl.config import Config, effective_ini, load_config, render_effective
from etl.errors import (EXIT_BATCH_FAILED, EXIT_CODES, EXIT_LAG_ABOVE_MAX, EXIT_OK, EXIT_RETRYABLE,
                        RETRYABLE_OS_ERRORS, EtlError, LockHeld)
from etl.source.kafka import KafkaMetadata
from etl.state.store import BATCHES_KEPT, RETRYABLE_ZK_ERRORS, ZkStateStore

log = logging.getLogger("etl")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    faults.arm()
    try:
        logs.configure(args.verbosity, args.log_format)
        config = load_config(args.config)
        logs.bind(job=config.job.name)
        return args.command(config, args)
    except LockHeld as exc:
        return _lock_held(exc, args)
    except EtlError as exc:
        print(f"etl: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except _TRANSIENT as exc:
        # Not raised through the ETL's own errors (a ZooKeeper call outside the retried reads, a
        # socket): the service did not answer, which a later run gets past like a Retryable error.
        print(f"etl: error: {type(exc).__name__}: {exc or 'no answer'}; ZooKeeper or another service did not "
              f"answer. Run again; an open batch is resumed", file=sys.stderr)
        return EXIT_RETRYABLE


_TRANSIENT = (*RETRYABLE_ZK_ERRORS, KazooTimeoutError, *RETRYABLE_OS_ERRORS)


def _lock_held(exc: LockHeld, args) -> int:
    """Another run holds the lock: a message (or a JSON object) on stdout, not an error."""
    code = getattr(args, "lock_held_exit_code", EXIT_OK)
    if getattr(args, "json", False):
        _emit({"event": "lock_held", "message": str(exc), "exit_code": code})
    else:
        print(f"etl: {exc}")
    return code


def _emit(record: dict) -> None:
    """One JSON object on one line (JSON Lines), flushed so that a reader sees it at once."""
    print(json.dumps(record), flush=True)


def _epilog() -> str:
    return "exit codes:\n" + "\n".join(textwrap.fill(meaning, 88, initial_indent=f"  {code:<4} ",
                                                      subsequent_indent=" " * 7) for code, meaning in EXIT_CODES)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="etl", description="Exactly-once Kafka to Hive ETL", epilog=_epilog(),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"etl {_version()}")
    commands = parser.add_subparsers(required=True, metavar="COMMAND")
    run = commands.add_parser("run", help="load new Kafka records into the Hive table")
    run.add_argument("--config", required=True)
    run.add_argument("--loop", action="store_true", help="keep running, sleeping --interval when caught up")
    run.add_argument("--interval", type=_positive_float, default=60.0, metavar="SECONDS")
    run.add_argument("--max-batches", type=_positive_int, default=None, metavar="N")
    run.add_argument("--lock-held-exit-code", type=_exit_code, default=EXIT_OK, metavar="N",
                     help="exit with N when another run holds the job's lock (default 0; Airflow: 99, skipped)")
    run.add_argument("--json", action="store_true", help="one JSON object per committed batch on stdout")
    run.set_defaults(command=cmd_run)
    status = commands.add_parser("status", help="committed offsets, lag and the last batch")
    status.add_argument("--config", required=True)
    status.add_argument("--json", action="store_true")
    status.add_argument("--max-lag", type=_non_negative_int, default=None, metavar="N",
                        help=f"exit {EXIT_LAG_ABOVE_MAX} when some partition's lag is above N records")
    status.set_defaults(command=cmd_status)
    history = commands.add_parser("history", help="the last batches: times, rows, rejected, rows/s")
    history.add_argument("--config", required=True)
    history.add_argument("--limit", type=_positive_int, default=20, metavar="N",
                         help=f"the newest N batches (default 20; ZooKeeper keeps {BATCHES_KEPT})")
    history.add_argument("--json", action="store_true")
    history.set_defaults(command=cmd_history)
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
    recover.add_argument("--json", action="store_true")
    recover.set_defaults(command=cmd_recover)
    reset = commands.add_parser("reset-offsets", help="move committed offsets, on the record")
    reset.add_argument("--config", required=True)
    reset.add_argument("--to", nargs="+", required=True, metavar="earliest|latest|TOPIC:PARTITION=OFFSET")
    reset.add_argument("--yes", action="store_true", help="apply; without it only show the changes")
    reset.add_argument("--move-aside", action="store_true",
                       help="backwards: move the committed files at and after the new offsets out of the table, "
                            "so that reloading them is exactly once (without it a backwards reset is refused)")
    reset.add_argument("--json", action="store_true")
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
    show = commands.add_parser("config", help="check the config, then print it as the job sees it: the file with "
                                              "its ETL__ environment overrides, secrets masked")
    show.add_argument("--config", required=True)
    show.set_defaults(command=cmd_config)
    schema = commands.add_parser("schema", help="compare the table with the writer schemas producers use")
    schema_commands = schema.add_subparsers(required=True, metavar="SUBCOMMAND")
    suggest = schema_commands.add_parser("suggest", help="print the DDL columns the latest writer schemas have "
                                                         "and the table lacks")
    suggest.add_argument("--config", required=True)
    suggest.add_argument("--json", action="store_true")
    suggest.set_defaults(command=cmd_schema_suggest)
    logs.add_options(parser, [*commands.choices.values(), *schema_commands.choices.values()])
    return parser


def _version() -> str:
    """The installed distribution's version (pyproject.toml reads it from etl.__version__);
    etl.__version__ itself when the package runs from a source tree without being installed."""
    try:
        return metadata.version("kafka-hive-etl")
    except metadata.PackageNotFoundError:
        import etl
        return etl.__version__


def _exit_code(raw: str) -> int:
    value = int(raw)
    if not 0 <= value <= 255:
        raise argparse.ArgumentTypeError("must be from 0 to 255")
    return value


def _non_negative_int(raw: str) -> int:
    value = int(raw)
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


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
    from etl.ops.metrics import published_metrics
    with published_metrics(config) as observer:  # [metrics]: published however the run ends
        return run_job(config, loop=args.loop, interval=args.interval, max_batches=args.max_batches,
                       emit=_emit if args.json else None, observer=observer)


def cmd_status(config: Config, args) -> int:
    from etl.ops.status import collect_status, over_max_lag, render_over_max_lag, render_status
    with ZkStateStore(config.zookeeper, config.job.name, config.retry) as store:
        kafka = KafkaMetadata(config.kafka, config.retry, config.job.name)
        try:
            status = collect_status(config, store, kafka)
        finally:
            kafka.close()
    over = None if args.max_lag is None else over_max_lag(status, args.max_lag)
    if args.json:
        print(json.dumps(status if over is None else {**status, "max_lag": args.max_lag, "over_max_lag": over},
                         indent=2))
    else:
        print(render_status(status) + ("" if over is None else "\n" + render_over_max_lag(over, args.max_lag)))
    return EXIT_LAG_ABOVE_MAX if over else EXIT_OK


def cmd_history(config: Config, args) -> int:
    from etl.ops.history import collect_history, render_history
    with ZkStateStore(config.zookeeper, config.job.name, config.retry) as store:
        batches = collect_history(store, args.limit)
    print(json.dumps({"job": config.job.name, "batches": batches}, indent=2) if args.json
          else render_history(config.job.name, batches))
    return EXIT_OK


def cmd_verify(config: Config, args) -> int:
    from etl.ops.verify import run_verify
    report = run_verify(config, deep=args.deep)
    print(json.dumps(report.to_json(), indent=2) if args.json else report.render())
    return EXIT_OK if report.ok else EXIT_BATCH_FAILED


def cmd_recover(config: Config, args) -> int:
    from etl.ops.recovery import recover
    if not args.json:
        return recover(config, dry_run=args.dry_run, accept_loss=args.accept_loss)
    report, lines = {}, []
    code = recover(config, dry_run=args.dry_run, accept_loss=args.accept_loss, out=lines.append, report=report)
    print(json.dumps({"exit_code": code, **report, "messages": lines}, indent=2))
    return code


def cmd_reset(config: Config, args) -> int:
    from etl.ops.reset import reset_offsets
    if not args.json:
        return reset_offsets(config, args.to, yes=args.yes, move_aside=args.move_aside)
    report, lines = {}, []
    code = reset_offsets(config, args.to, yes=args.yes, move_aside=args.move_aside, out=lines.append, report=report)
    print(json.dumps({"exit_code": code, **report, "messages": lines}, indent=2))
    return code


def cmd_bind(config: Config, args) -> int:
    from etl.ops.rebind import bind
    return bind(config, yes=args.yes, data_moved=args.data_moved)


def cmd_compact(config: Config, args) -> int:
    from etl.ops.compact import run_compact
    return run_compact(config, args.partition, dry_run=args.dry_run, as_json=args.json)


def cmd_config(config: Config, args) -> int:
    """The config was checked (load_config) before this runs; here it is shown, not re-checked."""
    parser, overrides = effective_ini(config.path)
    print(render_effective(parser, overrides, str(config.path)), end="")
    return EXIT_OK


def cmd_schema_suggest(config: Config, args) -> int:
    from etl.ops.schema_suggest import render, suggest
    suggestions = suggest(config)
    print(json.dumps([s.to_json() for s in suggestions], indent=2) if args.json else render(suggestions, config))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
