"""How every command logs: one line per record on stderr, timestamps in UTC, text or JSON.

    text: 2026-11-24T14:15:25.123Z INFO etl.job.driver: batch 12 LOAD PLANNED: ...
    json: {"ts": "2026-11-24T14:15:25.123Z", "level": "INFO", "logger": "etl.job.driver",
           "message": "batch 12 LOAD PLANNED: ...", "job": "clicks", "batch_id": 12, "state": "PLANNED"}

The job, batch id and batch state are fields of the process (one process runs one job, a batch
at a time): `bind` sets them as the driver plans and advances a batch, and every line after
carries them, from whichever thread it is logged. A record's own `extra` wins.

Libraries are quiet by default: their INFO lines are about connections and requests, and a
ZooKeeper that does not answer would otherwise print two kazoo lines per attempt before the one
error that says so. -v shows them.

With JSON, every line on stderr is JSON: the command's errors (`error`) and its uncaught
exceptions (`json_hooks`) are records too, and what other writers put on the process's stderr
(the driver JVM's launcher, librdkafka, Spark's Python workers) passes through `relay_stderr`,
which wraps each line that is not JSON already.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from enum import StrEnum
from typing import Any, Iterable, TextIO

from etl.errors import ConfigError

FORMAT_ENV = "ETL_LOG_FORMAT"
FIELDS = ("job", "batch_id", "state")
HANDLER_NAME = "etl"


class Verbosity(StrEnum):
    QUIET = "quiet"  # -q: warnings and errors only
    NORMAL = "normal"
    VERBOSE = "verbose"  # -v: the job's debug lines, and the libraries' INFO lines


class LogFormat(StrEnum):
    TEXT = "text"
    JSON = "json"


# Their level unless -v. kazoo logs each failed connection attempt as a WARNING and retries;
# the job reports the outcome itself (cannot connect, session lost) as an error.
LIBRARY_LEVELS = {"kazoo": logging.ERROR, "py4j": logging.WARNING, "urllib3": logging.WARNING,
                  "httpx2": logging.WARNING, "confluent_kafka": logging.WARNING}

_fields: dict[str, object] = {}
_format = LogFormat.TEXT  # the one configure() chose last


def bind(**fields: object) -> None:
    """Set (or with None, clear) fields that every following line carries."""
    global _fields
    merged = {**_fields, **fields}
    _fields = {key: value for key, value in merged.items() if value is not None}  # one swap: threads read it whole


def bound() -> dict[str, object]:
    return dict(_fields)


def utc_timestamp(created: float) -> str:
    """2026-11-24T14:15:25.123Z: ISO-8601, UTC, milliseconds."""
    seconds, millis = divmod(round(created * 1000), 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return utc_timestamp(record.created)


class JsonFormatter(logging.Formatter):
    """One JSON object per line; a traceback goes in "exc", never over several lines. PySpark's
    loggers' keyword arguments (errorClass, fragment, ...) go in "context"."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {"ts": utc_timestamp(record.created), "level": record.levelname,
                                    "logger": record.name, "message": record.getMessage()}
        context = getattr(record, "context", None)
        if context:
            entry["context"] = context
        entry.update(_fields)
        entry.update({key: getattr(record, key) for key in FIELDS if getattr(record, key, None) is not None})
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


class _StderrHandler(logging.StreamHandler):
    """Writes to sys.stderr as it is when a record comes: a test runner or an embedding
    scheduler swaps it per command, and closes the one it swapped out."""

    def __init__(self):
        logging.Handler.__init__(self)

    @property
    def stream(self) -> TextIO:
        return sys.stderr


def configure(verbosity: Verbosity | str = Verbosity.NORMAL, log_format: LogFormat | str | None = None,
              stream: TextIO | None = None) -> None:
    """Route every logger to one handler on `stream` (stderr), replacing the one an earlier call
    installed; a handler someone else put on the root logger (a test runner's) stays.

    `log_format` None: $ETL_LOG_FORMAT, else text. A bad value raises ConfigError naming it."""
    verbosity = Verbosity(verbosity)
    chosen = log_format or os.environ.get(FORMAT_ENV) or LogFormat.TEXT
    try:
        chosen = LogFormat(chosen)
    except ValueError:
        source = f"${FORMAT_ENV}" if log_format is None else "--log-format"
        raise ConfigError(f"{source}={chosen!r}: choose one of {', '.join(LogFormat)}") from None
    handler = logging.StreamHandler(stream) if stream is not None else _StderrHandler()
    handler.setFormatter(JsonFormatter() if chosen is LogFormat.JSON else TextFormatter())
    handler.set_name(HANDLER_NAME)
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == HANDLER_NAME]:  # configured before, in this process
        root.removeHandler(old)
    root.addHandler(handler)
    for name in PYSPARK_LOGGERS:
        _adopt(name, handler)
    verbose = verbosity is Verbosity.VERBOSE
    root.setLevel(logging.INFO if verbose else logging.WARNING)  # other libraries: as quiet as the listed ones
    logging.getLogger("etl").setLevel({Verbosity.QUIET: logging.WARNING, Verbosity.NORMAL: logging.INFO,
                                       Verbosity.VERBOSE: logging.DEBUG}[verbosity])
    for name, level in LIBRARY_LEVELS.items():
        logging.getLogger(name).setLevel(logging.INFO if verbose else level)
    global _fields, _format
    _fields = {}  # a new command starts with no job or batch: an earlier one in this process had its own
    _format = chosen


# PySpark's own loggers (pyspark.errors.exceptions.base: made when an exception with a query
# context is, an AnalysisException the job catches included). Left to PySpark, each writes its
# own JSON (`msg`, a local time without T or Z) straight to stderr, in text mode too.
PYSPARK_LOGGERS = ("DataFrameQueryContextLogger", "SQLQueryContextLogger")


class _KeywordLogger(logging.Logger):
    """The class of PySpark's loggers when the job makes them first: their keyword arguments
    become the record's `context`, as PySparkLogger's do (PySpark calls them so)."""

    def _log(self, level, msg, args, exc_info=None, extra=None, stack_info=False, stacklevel=1,
             **context: object) -> None:
        super()._log(level, msg, args, exc_info, {**(extra or {}), "context": context}, stack_info, stacklevel + 1)


def _adopt(name: str, handler: logging.Handler) -> None:
    """PySpark's logger `name` writes through the job's handler alone (PySpark sets propagate
    off: the root's handler never sees its records), whoever made it first."""
    logger = logging.Logger.manager.loggerDict.get(name)
    if not isinstance(logger, logging.Logger):
        previous = logging.getLoggerClass()
        logging.setLoggerClass(_KeywordLogger)
        try:
            logger = logging.getLogger(name)
        finally:
            logging.setLoggerClass(previous)
    for old in list(logger.handlers):  # PySparkLogger's own JSON handler, or an earlier configure's
        logger.removeHandler(old)
    logging.Logger.addHandler(logger, handler)  # not PySparkLogger.addHandler: it sets its JSON formatter
    logger.propagate = False


def add_options(top: argparse.ArgumentParser, commands: Iterable[argparse.ArgumentParser]) -> None:
    """-q, -v and --log-format, before the command (`etl -q run ...`) or after it (`etl run -q ...`)."""
    _options(top)
    top.set_defaults(verbosity=Verbosity.NORMAL, log_format=None)
    for command in commands:
        # Not given after the command: the value given before it, or the default, stays.
        _options(command, default=argparse.SUPPRESS)


def _options(parser: argparse.ArgumentParser, **default: Any) -> None:
    group = parser.add_argument_group("logging")
    noise = group.add_mutually_exclusive_group()
    noise.add_argument("-q", "--quiet", dest="verbosity", action="store_const", const=Verbosity.QUIET,
                       help="warnings and errors only", **default)
    noise.add_argument("-v", "--verbose", dest="verbosity", action="store_const", const=Verbosity.VERBOSE,
                       help="the job's debug lines and the libraries' INFO lines", **default)
    group.add_argument("--log-format", choices=list(LogFormat), metavar="text|json",
                       help=f"log line format (default: ${FORMAT_ENV}, else text)", **default)


def chosen_format() -> LogFormat:
    """The format configure() chose (the driver JVM's log4j config follows it: etl.hive.spark)."""
    return _format


def format_in(argv: list[str]) -> LogFormat:
    """The format a command line asks for, read before argparse, whose own errors must already
    be in it: --log-format's last value, else $ETL_LOG_FORMAT, else text (also for a bad value,
    which configure() then refuses)."""
    chosen = os.environ.get(FORMAT_ENV)
    for i, arg in enumerate(argv):
        if arg == "--log-format" and i + 1 < len(argv):
            chosen = argv[i + 1]
        elif arg.startswith("--log-format="):
            chosen = arg.partition("=")[2]
    return LogFormat.JSON if chosen == LogFormat.JSON else LogFormat.TEXT


def error(message: str, log_format: LogFormat | None = None, **fields: object) -> None:
    """The command's own error line on stderr: `etl: error: ...`, or as one JSON record."""
    if (log_format or _format) is LogFormat.TEXT:
        print(f"etl: error: {message}", file=sys.stderr, flush=True)
        return
    record = {"ts": utc_timestamp(time.time()), "level": "ERROR", "logger": "etl", "message": message,
              **_fields, **fields}
    print(json.dumps(record, ensure_ascii=False, default=str), file=sys.stderr, flush=True)


def json_hooks() -> None:
    """With JSON: an uncaught exception, in any thread, is one record with its traceback in "exc"
    rather than Python's lines, and the warnings module logs through the handler."""
    crash = logging.getLogger("etl.crash")

    def uncaught(kind, value, traceback) -> None:
        crash.critical("uncaught %s: %s", kind.__name__, value, exc_info=(kind, value, traceback))

    sys.excepthook = uncaught
    threading.excepthook = lambda hook: uncaught(hook.exc_type, hook.exc_value, hook.exc_traceback)
    logging.captureWarnings(True)


# librdkafka's own lines: %<syslog level>|<time>|<facility>|<client>| <message>
_RDKAFKA = re.compile(r"^%(\d)\|")
_SYSLOG_LEVELS = ("CRITICAL", "CRITICAL", "CRITICAL", "ERROR", "WARNING", "INFO", "INFO", "DEBUG")
_WORDS = re.compile(r"^\W*(warn|warning|error|severe|fatal|exception|traceback)\b", re.IGNORECASE)
_LEVEL_OF_WORD = {"warn": "WARNING", "warning": "WARNING", "error": "ERROR", "severe": "ERROR", "fatal": "CRITICAL",
                  "exception": "ERROR", "traceback": "ERROR"}


def wrapped(line: str, fields: dict[str, object]) -> str:
    """A line of stderr as JSON: unchanged if it is a JSON object already, else a record of the
    logger "stderr", its level read from the line (librdkafka's, a leading word) or WARNING: a
    line written outside the logging is there for someone to read."""
    text = line.rstrip("\r\n")
    if text.startswith("{"):
        try:
            record = json.loads(text)
        except ValueError:
            record = None
        if isinstance(record, dict):
            return json.dumps(_from_pyspark(record, fields), ensure_ascii=False) if _is_pyspark(record) else text
    rdkafka, word = _RDKAFKA.match(text), _WORDS.match(text)
    level = (_SYSLOG_LEVELS[int(rdkafka.group(1))] if rdkafka
             else _LEVEL_OF_WORD[word.group(1).lower()] if word else "WARNING")
    return json.dumps({"ts": utc_timestamp(time.time()), "level": level, "logger": "stderr", "message": text,
                       **fields}, ensure_ascii=False)


def _is_pyspark(record: dict) -> bool:
    """A record in PySpark's JSON schema (pyspark.logger: `msg`, not `message`)."""
    return "msg" in record and "message" not in record


def _from_pyspark(record: dict, fields: dict[str, object]) -> dict:
    """A PySpark record in the job's schema: `ts` in UTC (PySpark writes the writer's local time,
    this machine's), `message`, and its exception as `exc` text."""
    entry = {"ts": _utc_of_local(str(record.get("ts", ""))), "level": record.get("level", "WARNING"),
             "logger": record.get("logger", "pyspark"), "message": record["msg"]}
    if record.get("context"):
        entry["context"] = record["context"]
    error = record.get("exception")
    if isinstance(error, dict):
        frames = "".join(f"\n  File \"{f.get('file')}\", line {f.get('line')}, in {f.get('method')}"
                         for f in error.get("stacktrace") or [] if isinstance(f, dict))
        entry["exc"] = f"{error.get('class')}: {error.get('msg')}{frames}"
    return {**entry, **fields}


def _utc_of_local(stamp: str) -> str:
    """'2026-11-28 01:40:12.123' (or ',123'), local time, as utc_timestamp writes it; now when unreadable."""
    import datetime as dt
    try:
        local = dt.datetime.strptime(stamp.replace(",", "."), "%Y-%m-%d %H:%M:%S.%f")
    except ValueError:
        return utc_timestamp(time.time())
    return utc_timestamp(local.astimezone().timestamp())  # naive: taken as this machine's local time


def relay_stderr(fields: dict[str, object]) -> None:
    """Route this process's stderr (fd 2, which its children inherit) through a relay process
    that writes every line to the real stderr as JSON (`wrapped`). A process, not a thread: a
    child that outlives this process by a moment (spark-submit's) still has its last lines
    passed; the relay ends when the last writer closes the pipe (the driver JVM that `etl`
    launches writes through etl.hive.jvm_output, not here). It ignores SIGINT and SIGTERM, so
    that a stopped command's last words are still relayed. Without a stderr (a daemon closed
    it) there is nothing to relay to."""
    try:
        os.fstat(2)
    except OSError:
        return
    sys.stderr.flush()
    read, write = os.pipe()
    package_parent = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (package_parent, os.environ.get("PYTHONPATH"))))}
    subprocess.Popen([sys.executable, "-c", "import etl.logs, json, sys; etl.logs.relay(json.loads(sys.argv[1]))",
                      json.dumps(fields, default=str)], stdin=read, stdout=2, env=env)  # fd 2 as it is still
    os.close(read)
    os.dup2(write, 2)
    os.close(write)


def relay(fields: dict[str, object]) -> None:
    """The relay process's loop (relay_stderr): stdin to stdout, line by line, as JSON."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    source = open(0, encoding="utf-8", errors="replace", newline="\n")
    for line in source:
        sys.stdout.write(wrapped(line, fields) + "\n")
        sys.stdout.flush()
