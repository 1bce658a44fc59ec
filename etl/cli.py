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

from kazoo.handlers.threading import KazooTimeoutError

import etl
from etl import faults, logs
from etl.config import Config, effective_ini, load_config, render_effective
from etl.errors import (EXIT_BATCH_FAILED, EXIT_CODES, EXIT_LAG_ABOVE_MAX, EXIT_OK, EXIT_RETRYABLE,
                        EXIT_USAGE, RETRYABLE_OS_ERRORS, EtlError, LockHeld)
from etl.ops.acting import Act, act_of, add_act_options
from etl.ops.check import CheckResult, unknown
from etl.state.store import BATCHES_KEPT, RETRYABLE_ZK_ERRORS

log = logging.getLogger("etl")


def main(argv: list[str] | None = None) -> int:
    """`argv` None: run as the program (`etl`, `python -m etl`), which with JSON logs also
    turns its uncaught exceptions into records and relays its children's stderr (etl.logs)."""
    program = argv is None
    argv = sys.argv[1:] if argv is None else argv
    args = _parser(logs.format_in(argv)).parse_args(argv)
    faults.arm()
    try:
        logs.configure(args.verbosity, args.log_format)
        if program and logs.chosen_format() is logs.LogFormat.JSON:
            logs.json_hooks()
        config = load_config(args.config)
        if args.command in _NOT_ROUTED_YET:
            config.routes.refuse_routes(f"etl {_NOT_ROUTED_YET[args.command]}")
        logs.bind(job=config.job.name)
        if program and logs.chosen_format() is logs.LogFormat.JSON:
            logs.relay_stderr(logs.bound())
        return args.command(config, args)
    except LockHeld as exc:
        return _lock_held(exc, args)
    except EtlError as exc:
        return _failed(args, str(exc), exc.exit_code)
    except _TRANSIENT as exc:
        # Not raised through the ETL's own errors (a ZooKeeper call outside the retried reads, a
        # socket): the service did not answer, which a later run gets past like a Retryable error.
        return _failed(args, f"{type(exc).__name__}: {exc or 'no answer'}; ZooKeeper or another service did not "
                             f"answer. Run again; an open batch is resumed", EXIT_RETRYABLE)


_TRANSIENT = (*RETRYABLE_ZK_ERRORS, KazooTimeoutError, *RETRYABLE_OS_ERRORS)


def _failed(args, message: str, code: int) -> int:
    """The error on stderr (`etl: error: ...`, or a JSON record with the code the process exits
    with); `etl check` says UNKNOWN, and exits 3 whatever the error's own code."""
    result = unknown(message) if getattr(args, "nagios", False) else None
    logs.error(message, exit_code=code if result is None else int(result.state))
    return code if result is None else _nagios(result)


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


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Each option's default in its help, where it takes a value whose default is worth saying
    (not None), and its help does not say it already. Flags are off unless given."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        shown = action.help or ""
        unsaid = action.default is None or action.default == argparse.SUPPRESS or action.nargs == 0
        if unsaid or "default" in shown or not action.option_strings:
            return action.help
        return f"{shown} (default: %(default)s)".lstrip()


class _Parser(argparse.ArgumentParser):
    """Its usage errors (exit 2) are a JSON record with --log-format json; `etl check`'s are a
    plugin's UNKNOWN (exit 3)."""

    log_format = logs.LogFormat.TEXT
    nagios = False

    def error(self, message: str):
        if self.nagios:
            self.exit(_nagios(unknown(f"{self.prog}: {message}")))
        if self.log_format is logs.LogFormat.JSON:
            logs.error(f"{self.prog}: {message}", logs.LogFormat.JSON, usage=self.format_usage().strip(),
                       exit_code=EXIT_USAGE)
            self.exit(EXIT_USAGE)
        super().error(message)


def _parser(log_format: logs.LogFormat = logs.LogFormat.TEXT) -> argparse.ArgumentParser:
    parser_class = type("Parser", (_Parser,), {"log_format": log_format})  # its sub-commands' parsers too
    parser = parser_class(prog="etl", description="Exactly-once Kafka to Hive ETL", epilog=_epilog(),
                          formatter_class=_HelpFormatter)
    parser.add_argument("--version", action="version", version=f"etl {etl.__version__}")  # pyproject's too
    commands = parser.add_subparsers(required=True, metavar="COMMAND")
    run = _command(commands, "run", cmd_run, "load new Kafka records into the Hive table")
    run.add_argument("--loop", action="store_true", help="keep running, sleeping --interval when caught up")
    run.add_argument("--interval", type=_positive_float, default=60.0, metavar="SECONDS",
                     help="with --loop: the sleep when caught up")
    run.add_argument("--max-batches", type=_positive_int, default=None, metavar="N",
                     help="stop after N committed batches (default: when caught up; with --loop, never)")
    run.add_argument("--lock-held-exit-code", type=_exit_code, default=EXIT_OK, metavar="N",
                     help="exit with N when another run holds the job's lock (Airflow: 99, skipped)")
    run.add_argument("--dry-run", action="store_true", help="print the batch a run would load now, its offset "
                                                            "ranges and target partitions; change nothing")
    run.add_argument("--json", action="store_true", help="one JSON object per committed batch on stdout")
    status = _command(commands, "status", cmd_status, "committed offsets, lag and the last batch")
    status.add_argument("--json", action="store_true")
    status.add_argument("--max-lag", type=_non_negative_int, default=None, metavar="N",
                        help=f"exit {EXIT_LAG_ABOVE_MAX} when some partition's lag is above N records "
                             f"(for a Nagios-style check: etl check)")
    check = _command(commands, "check", cmd_check, "the lag as a Nagios plugin: one status line with perfdata; "
                                                   "exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN")
    check.nagios = True  # its usage errors too
    check.set_defaults(nagios=True)
    check.add_argument("--warn-lag", type=_non_negative_int, required=True, metavar="N",
                       help="WARNING when some partition's lag is above N records")
    check.add_argument("--crit-lag", type=_non_negative_int, required=True, metavar="M",
                       help="CRITICAL when some partition's lag is above M records (M >= N)")
    history = _command(commands, "history", cmd_history, "the last batches: times, rows, rejected, rows/s")
    history.add_argument("--limit", type=_positive_int, default=20, metavar="N",
                         help=f"the newest N batches (ZooKeeper keeps {BATCHES_KEPT})")
    history.add_argument("--json", action="store_true")
    verify = _command(commands, "verify", cmd_verify, "check the warehouse against ZooKeeper; exit 0 only if all holds")
    verify.add_argument("--deep", action="store_true", help="also read every row through Hive")
    verify.add_argument("--json", action="store_true")
    recover = _command(commands, "recover", cmd_recover,
                       "explain the state a crash left, and with --execute complete it")
    add_act_options(recover, "--dry-run")
    recover.add_argument("--accept-loss", action="store_true",
                         help="record committed ranges that no file covers and Kafka no longer holds as lost")
    recover.add_argument("--json", action="store_true")
    reset = _command(commands, "reset-offsets", cmd_reset, "move committed offsets, on the record")
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--to", nargs="+", metavar="earliest|latest|TOPIC:PARTITION=OFFSET")
    target.add_argument("--to-datetime", dest="to", metavar="ISO-8601",
                        help="each partition's first offset whose record's timestamp is at or after this time, which "
                             "says its zone (2026-11-25T14:30:00Z, +01:00); its end, as latest, where none is")
    add_act_options(reset, "--yes")
    reset.add_argument("--move-aside", action="store_true",
                       help="backwards: move the committed files at and after the new offsets out of the table, "
                            "so that reloading them is exactly once (without it a backwards reset is refused)")
    reset.add_argument("--rebuild-rollups", action="store_true",
                       help="backwards under a rollup kept in PostgreSQL: make its rows there again from the table's "
                            "partials once the reset is done (without it such a reset is refused)")
    reset.add_argument("--json", action="store_true")
    bind = _command(commands, "bind", cmd_bind, "move the job to the table and folders its config names now")
    add_act_options(bind, "--yes")
    bind.add_argument("--data-moved", action="store_true",
                      help="the loaded files were moved to the new folders too: verify checks them")
    bind.add_argument("--stop-loading", action="store_true",
                      help="with routes: stop loading topics no route takes any more")
    bind.add_argument("--move-loaded", action="store_true", help="with routes: send loaded topics to their new tables")
    compact = _command(commands, "compact", cmd_compact,
                       "merge the small files of finished Hive partitions, exactly once")
    compact.add_argument("--partition", action="append", type=_partition, metavar="dt=YYYY-MM-DD[/hour=HH]",
                         help="compact this partition whether or not it is finished (repeatable)")
    compact.add_argument("--table", action="append", metavar="TABLE", help="only this table, by its Hive name: one of "
                         "the routes' tables, or the rejected table (repeatable)")
    add_act_options(compact, "--dry-run")
    compact.add_argument("--json", action="store_true")
    _command(commands, "config", cmd_config, "check the config, then print it as the job sees it: the file with "
                                             "its ETL__ environment overrides, secrets masked")
    schema = commands.add_parser("schema", help="compare the table with the writer schemas producers use",
                                 formatter_class=_HelpFormatter)
    schema_commands = schema.add_subparsers(required=True, metavar="SUBCOMMAND")
    suggest = _command(schema_commands, "suggest", cmd_schema_suggest, "print the DDL columns the latest writer "
                                                                       "schemas have and the table lacks")
    suggest.add_argument("--json", action="store_true")
    rollup = commands.add_parser("rollup", help="a rollup's partials and view ([rollup <name>] sections)",
                                 formatter_class=_HelpFormatter)
    rollup_commands = rollup.add_subparsers(required=True, metavar="SUBCOMMAND")
    rebuild = _command(rollup_commands, "rebuild", cmd_rollup_rebuild, "build a rollup's partials anew from the rows "
                                                                        "its table holds, and its view")
    rebuild.add_argument("--rollup", required=True, metavar="NAME", help="the rollup: its section's name")
    rebuild.add_argument("--execute", dest="act", action="store_const", const=Act.EXECUTE, default=Act.PREVIEW,
                         help="do it; without it the command only shows what it would do, and changes nothing")
    logs.add_options(parser, [*commands.choices.values(), *schema_commands.choices.values(),
                              *rollup_commands.choices.values()])
    return parser


def _command(commands, name: str, handler, help: str) -> _Parser:
    """A sub-command that reads the job's config."""
    command = commands.add_parser(name, help=help, description=help, formatter_class=_HelpFormatter)
    command.add_argument("--config", required=True, metavar="FILE", help="the job's INI file")
    command.set_defaults(command=handler)
    return command


def _number(convert, low: float, says: str, high: float | None = None):
    """An argparse type: `convert`'s value, at least `low` (and at most `high`), or `says`."""
    def parse(raw: str):
        value = convert(raw)
        if value < low or (high is not None and value > high) or (convert is float and value == low):
            raise argparse.ArgumentTypeError(says)
        return value
    parse.__name__ = "integer" if convert is int else "number"  # argparse: "invalid integer value: 'x'"
    return parse


_exit_code = _number(int, 0, "must be from 0 to 255", 255)
_non_negative_int = _number(int, 0, "must be 0 or more")
_positive_int = _number(int, 1, "must be greater than 0")
_positive_float = _number(float, 0, "must be greater than 0")


def _partition(raw: str) -> str:
    parts = raw.strip("/").split("/")
    if not all("=" in part and part.split("=", 1)[0] and part.split("=", 1)[1] for part in parts):
        raise argparse.ArgumentTypeError(f"{raw!r} is not a partition path such as dt=2026-11-22/hour=13")
    return "/".join(parts)


def cmd_run(config: Config, args) -> int:
    if args.dry_run:
        from etl.ops.dry_run import dry_run, render
        preview = dry_run(config)
        print(json.dumps(preview, indent=2) if args.json else render(preview))
        return EXIT_OK
    from etl.hive.spark import launch_early
    # The driver JVM boots while the run imports and plans (a loop pays its start once, and waits)
    early = None if args.loop else launch_early(config)
    from etl.ops.run import RunOptions, run_job
    from etl.ops.metrics import published_metrics
    with published_metrics(config) as observer:  # [metrics]: published however the run ends
        return run_job(config, RunOptions(args.loop, args.interval, args.max_batches), observer,
                       emit=_emit if args.json else None, early=early)


def cmd_status(config: Config, args) -> int:
    from etl.context.job import JobContext
    from etl.ops.status import asked_once, collect_status, over_max_lag, render_over_max_lag, render_status
    with JobContext(config, retry=asked_once(config)) as context:  # an answer within the configured timeouts
        status = collect_status(config, context.store, context.kafka)
    over = None if args.max_lag is None else over_max_lag(status, args.max_lag)
    if args.json:
        print(json.dumps(status if over is None else {**status, "max_lag": args.max_lag, "over_max_lag": over},
                         indent=2))
    else:
        print(render_status(status) + ("" if over is None else "\n" + render_over_max_lag(over, args.max_lag)))
    return EXIT_LAG_ABOVE_MAX if over else EXIT_OK


def cmd_check(config: Config, args) -> int:
    from etl.ops.check import run_check
    if args.crit_lag < args.warn_lag:
        return _failed(args, f"--crit-lag {args.crit_lag} is below --warn-lag {args.warn_lag}", EXIT_USAGE)
    try:
        return _nagios(run_check(config, args.warn_lag, args.crit_lag))
    except (EtlError, *_TRANSIENT):
        raise  # main says UNKNOWN, with the message
    except Exception as exc:
        # A check that cannot tell is UNKNOWN, never OK or a lag alarm: a bug included (its traceback logged).
        log.exception("etl check failed")
        return _nagios(unknown(f"{type(exc).__name__}: {exc}"))


def _nagios(result: CheckResult) -> int:
    """The plugin's one line on stdout, and its exit code."""
    print(result.line, flush=True)
    return int(result.state)


def cmd_history(config: Config, args) -> int:
    from etl.context.command import CommandContext
    from etl.ops.history import collect_history, render_history
    with CommandContext(config) as context:
        batches = collect_history(context.store.batches, args.limit)
    print(json.dumps({"job": config.job.name, "batches": batches}, indent=2) if args.json
          else render_history(config.job.name, batches))
    return EXIT_OK


def cmd_verify(config: Config, args) -> int:
    from etl.ops.verify import run_verify
    report = run_verify(config, deep=args.deep)
    print(json.dumps(report.to_json(), indent=2) if args.json else report.render())
    return EXIT_OK if report.ok else EXIT_BATCH_FAILED


def cmd_recover(config: Config, args) -> int:
    from etl.ops.recovery import RecoverOptions, recover
    return _reported(args, lambda **out: recover(config, RecoverOptions(act_of(args), args.accept_loss), **out))


def cmd_reset(config: Config, args) -> int:
    from etl.ops.reset import ResetOptions, parse_targets, reset_offsets
    options = ResetOptions(parse_targets(args.to), act_of(args), move_aside=args.move_aside,
                           rebuild_rollups=args.rebuild_rollups)
    return _reported(args, lambda **out: reset_offsets(config, options, **out))


def _reported(args, call) -> int:
    """With --json, one document: the command's report, its exit code and the lines it would
    print; a refusal's too, with its message, before main reports the error."""
    if not args.json:
        return call()
    report, lines = dict[str, object](), list[str]()
    try:
        code = call(out=lines.append, report=report)
    except EtlError as exc:
        print(json.dumps({"exit_code": exc.exit_code, **report, "messages": lines, "error": str(exc)}, indent=2))
        raise
    print(json.dumps({"exit_code": code, **report, "messages": lines}, indent=2))
    return code


def cmd_bind(config: Config, args) -> int:
    from etl.ops.rebind import BindOptions, bind
    return bind(config, BindOptions(act_of(args), args.data_moved, args.stop_loading, args.move_loaded))


def cmd_compact(config: Config, args) -> int:
    from etl.ops.compact import CompactOptions, run_compact
    partitions, tables = (None if values is None else tuple(values) for values in (args.partition, args.table))
    return run_compact(config, CompactOptions(partitions, tables, act_of(args), args.json))


def cmd_config(config: Config, args) -> int:
    """The config was checked (load_config) before this runs; here it is shown, not re-checked."""
    parser, overrides = effective_ini(config.path)
    print(render_effective(parser, overrides, str(config.path)), end="")
    return EXIT_OK


def cmd_rollup_rebuild(config: Config, args) -> int:
    from etl.ops.rollup_rebuild import RebuildOptions, rebuild_rollup
    return rebuild_rollup(config, RebuildOptions(args.rollup, args.act))


def cmd_schema_suggest(config: Config, args) -> int:
    from etl.ops.schema_suggest import render, suggest
    suggestions = suggest(config)
    print(json.dumps([s.to_json() for s in suggestions], indent=2) if args.json else render(suggestions, config))
    return EXIT_OK


# Read by main(): defined above the __main__ block, which `python -m etl.cli` runs as it reaches it.
_NOT_ROUTED_YET = {cmd_schema_suggest: "schema suggest"}


if __name__ == "__main__":
    sys.exit(main())
