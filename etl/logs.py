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
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from enum import StrEnum
from typing import Iterable, TextIO

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
    """One JSON object per line; a traceback goes in "exc", never over several lines."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {"ts": utc_timestamp(record.created), "level": record.levelname,
                                    "logger": record.name, "message": record.getMessage()}
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
    verbose = verbosity is Verbosity.VERBOSE
    root.setLevel(logging.INFO if verbose else logging.WARNING)  # other libraries: as quiet as the listed ones
    logging.getLogger("etl").setLevel({Verbosity.QUIET: logging.WARNING, Verbosity.NORMAL: logging.INFO,
                                       Verbosity.VERBOSE: logging.DEBUG}[verbosity])
    for name, level in LIBRARY_LEVELS.items():
        logging.getLogger(name).setLevel(logging.INFO if verbose else level)
    global _fields
    _fields = {}  # a new command starts with no job or batch: an earlier one in this process had its own


def add_options(top: argparse.ArgumentParser, commands: Iterable[argparse.ArgumentParser]) -> None:
    """-q, -v and --log-format, before the command (`etl -q run ...`) or after it (`etl run -q ...`)."""
    _options(top)
    top.set_defaults(verbosity=Verbosity.NORMAL, log_format=None)
    for command in commands:
        # Not given after the command: the value given before it, or the default, stays.
        _options(command, default=argparse.SUPPRESS)


def _options(parser: argparse.ArgumentParser, **default: object) -> None:
    group = parser.add_argument_group("logging")
    noise = group.add_mutually_exclusive_group()
    noise.add_argument("-q", "--quiet", dest="verbosity", action="store_const", const=Verbosity.QUIET,
                       help="warnings and errors only", **default)
    noise.add_argument("-v", "--verbose", dest="verbosity", action="store_const", const=Verbosity.VERBOSE,
                       help="the job's debug lines and the libraries' INFO lines", **default)
    group.add_argument("--log-format", choices=list(LogFormat), metavar="text|json",
                       help=f"log line format (default: ${FORMAT_ENV}, else text)", **default)
