"""etl.logs (formats, levels, the job/batch fields, the options) and the progress line's text."""
from __future__ import annotations

import argparse
import io
import json
import logging
import os
import re

import pytest

from etl import logs
from etl.errors import ConfigError
from etl.job.progress import Snapshot, _Counted

TEXT_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (\w+) ([\w.]+): (.*)$")


@pytest.fixture
def captured(monkeypatch):
    """configure(...) -> the text logged to its stream; the root logger is restored after."""
    monkeypatch.delenv(logs.FORMAT_ENV, raising=False)
    root, saved = logging.getLogger(), list(logging.getLogger().handlers)
    levels = {name: logging.getLogger(name).level for name in ("", "etl", *logs.LIBRARY_LEVELS)}
    fields = logs.bound()
    stream = io.StringIO()

    def configure(verbosity=logs.Verbosity.NORMAL, log_format=None):
        logs.configure(verbosity, log_format, stream=stream)
        return stream

    yield configure
    root.handlers[:] = saved
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)
    logs.bind(**{key: None for key in logs.FIELDS})
    logs.bind(**fields)


def _log_everything() -> None:
    logging.getLogger("etl.job.driver").debug("a debug line")
    logging.getLogger("etl.job.driver").info("an info line")
    logging.getLogger("etl.job.driver").warning("a warning")
    logging.getLogger("kazoo.client").info("Connecting to 127.0.0.1:2181")
    logging.getLogger("kazoo.client").warning("Connection dropped: socket connection error")
    logging.getLogger("kazoo.client").error("a kazoo error")
    logging.getLogger("py4j.clientserver").info("Closing down clientserver connection")
    logging.getLogger("some.other.library").info("hello")


def _lines(stream: io.StringIO) -> list[tuple[str, str, str]]:
    found = []
    for line in stream.getvalue().splitlines():
        match = TEXT_LINE.match(line)
        assert match, f"not a text log line: {line!r}"
        found.append(match.groups())
    return found


def test_text_lines_are_utc_iso_8601_with_level_and_logger(captured):
    stream = captured()
    record = logging.LogRecord("etl.job.driver", logging.INFO, __file__, 1, "batch %d PLANNED", (12,), None)
    record.created = 1795529725.123  # 2026-11-24 14:15:25.123 UTC, whatever the machine's zone
    next(h for h in logging.getLogger().handlers if h.get_name() == logs.HANDLER_NAME).handle(record)
    assert stream.getvalue() == "2026-11-24T14:15:25.123Z INFO etl.job.driver: batch 12 PLANNED\n"


def test_by_default_the_job_says_info_and_libraries_only_what_matters(captured):
    stream = captured()
    _log_everything()
    assert [(level, name) for level, name, _ in _lines(stream)] == [
        ("INFO", "etl.job.driver"), ("WARNING", "etl.job.driver"), ("ERROR", "kazoo.client")]


def test_quiet_keeps_warnings_and_errors(captured):
    stream = captured(logs.Verbosity.QUIET)
    _log_everything()
    assert [(level, name) for level, name, _ in _lines(stream)] == [
        ("WARNING", "etl.job.driver"), ("ERROR", "kazoo.client")]


def test_verbose_adds_the_jobs_debug_and_the_libraries_info(captured):
    stream = captured(logs.Verbosity.VERBOSE)
    _log_everything()
    assert [(level, name) for level, name, _ in _lines(stream)] == [
        ("DEBUG", "etl.job.driver"), ("INFO", "etl.job.driver"), ("WARNING", "etl.job.driver"),
        ("INFO", "kazoo.client"), ("WARNING", "kazoo.client"), ("ERROR", "kazoo.client"),
        ("INFO", "py4j.clientserver"), ("INFO", "some.other.library")]


def test_json_lines_carry_the_job_batch_and_state_from_any_thread(captured):
    import threading
    stream = captured(log_format="json")
    logs.bind(job="clicks")
    logging.getLogger("etl.ops.run").info("no batch yet")
    logs.bind(batch_id=12, state="PLANNED")
    thread = threading.Thread(target=logging.getLogger("etl.job.progress").info, args=("batch 12 tasks: 1/2",))
    thread.start()
    thread.join()
    logs.bind(state="COMMITTED")
    try:
        raise RuntimeError("boom\nsecond line")
    except RuntimeError:
        logging.getLogger("etl.job.driver").exception("failed")
    entries = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert len(entries) == 3  # the traceback stays inside its line
    assert entries[0] == {"ts": entries[0]["ts"], "level": "INFO", "logger": "etl.ops.run",
                          "message": "no batch yet", "job": "clicks"}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", entries[0]["ts"])
    assert {k: entries[1][k] for k in ("message", "job", "batch_id", "state")} == {
        "message": "batch 12 tasks: 1/2", "job": "clicks", "batch_id": 12, "state": "PLANNED"}
    assert entries[2]["state"] == "COMMITTED" and entries[2]["level"] == "ERROR"
    assert "RuntimeError: boom\nsecond line" in entries[2]["exc"]


def test_a_fields_value_given_with_the_record_wins(captured):
    stream = captured(log_format="json")
    logs.bind(job="clicks", batch_id=3)
    logging.getLogger("etl.ops.recovery").info("about batch 2", extra={"batch_id": 2})
    assert json.loads(stream.getvalue())["batch_id"] == 2


def test_the_format_comes_from_the_environment_unless_given(captured, monkeypatch):
    monkeypatch.setenv(logs.FORMAT_ENV, "json")
    stream = captured()
    logging.getLogger("etl").info("x")
    assert json.loads(stream.getvalue())["message"] == "x"
    monkeypatch.setenv(logs.FORMAT_ENV, "xml")
    with pytest.raises(ConfigError, match=r"\$ETL_LOG_FORMAT='xml': choose one of text, json"):
        captured()
    stream = captured(log_format="text")  # the option wins over the environment
    stream.seek(0)
    stream.truncate()
    logging.getLogger("etl").info("y")
    assert _lines(stream)[-1] == ("INFO", "etl", "y")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="etl")
    commands = parser.add_subparsers(required=True)
    run = commands.add_parser("run")
    run.add_argument("--config")
    logs.add_options(parser, [run])
    return parser


@pytest.mark.parametrize("argv, verbosity, log_format", [
    (["run"], "normal", None),
    (["-q", "run"], "quiet", None),
    (["run", "-q"], "quiet", None),
    (["-v", "--log-format", "json", "run", "--config", "F"], "verbose", "json"),
    (["--log-format", "json", "run", "-v"], "verbose", "json"),
    (["run", "--log-format", "text"], "normal", "text"),
])
def test_the_options_go_before_or_after_the_command(argv, verbosity, log_format):
    args = _parser().parse_args(argv)
    assert (args.verbosity, args.log_format) == (verbosity, log_format)


def test_quiet_and_verbose_together_are_refused(capsys):
    with pytest.raises(SystemExit):
        _parser().parse_args(["-q", "-v", "run"])
    assert "not allowed with argument" in capsys.readouterr().err


@pytest.mark.parametrize("snapshot, line", [
    (Snapshot(12, 8, 3, 1_234_567, 12.6), "batch 12 tasks: 3/8 ranges done, 1,234,567 rows, 97,982 rows/s"),
    (Snapshot(1, 4, 0, 0, 5.0), "batch 1 tasks: 0/4 ranges done, 0 rows, 0 rows/s"),
    (Snapshot(1, 4, 0, 0, 0.0), "batch 1 tasks: 0/4 ranges done, 0 rows, 0 rows/s"),
])
def test_the_progress_line(snapshot, line):
    assert snapshot.describe() == line


class _Accumulator:
    def __init__(self):
        self.value = 0

    def add(self, amount):
        self.value += amount


def test_a_counted_task_adds_its_rows_and_returns_its_result():
    rows = _Accumulator()
    result = argparse.Namespace(rows=250, rejected=3)
    counted = _Counted(lambda task: result, rows)
    assert counted("task") is result and counted("task") is result
    assert rows.value == 500


# -- the driver JVM's log4j2 config under `etl run` (etl.hive.spark; no JVM is started) ----------
def _java_options(settings: dict[str, str], monkeypatch, gateway: bool = False) -> str | None:
    from etl.hive.spark import DRIVER_JAVA_OPTIONS, _driver_java_options
    if gateway:
        monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "4040")
    else:
        monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    return _driver_java_options(settings, "").get(DRIVER_JAVA_OPTIONS)


def test_etl_run_starts_the_driver_jvm_with_the_packaged_log4j2_config(monkeypatch):
    from etl.hive.spark import DRIVER_LOG4J2
    option = f"-Dlog4j2.configurationFile={DRIVER_LOG4J2.as_uri()}"
    assert _java_options({}, monkeypatch) == option
    assert _java_options({"spark.driver.extraJavaOptions": "-XX:+UseSerialGC"}, monkeypatch) == \
        f"-XX:+UseSerialGC {option}"
    text = DRIVER_LOG4J2.read_text()
    assert "rootLogger.level = warn" in text and "target = SYSTEM_ERR" in text


def test_under_json_logs_the_driver_jvm_gets_the_spark_lines_json_overlay(monkeypatch, captured):
    """Spark 4's overlay needs a jar pyspark 3.5 lacks: the line's own (etl.spark_line) goes over the base."""
    from etl import spark_line
    from etl.hive.spark import DRIVER_LOG4J2
    captured(log_format="json")
    logs.bind(job="clicks")
    overlay = DRIVER_LOG4J2.with_name(spark_line.current().driver_log4j2_json)
    assert overlay.is_file()
    assert _java_options({}, monkeypatch) == \
        f"-Dlog4j2.configurationFile={DRIVER_LOG4J2.as_uri()},{overlay.as_uri()} -Detl.log.job=clicks"


@pytest.mark.parametrize("settings, gateway", [
    ({"spark.driver.extraJavaOptions": "-Dlog4j2.configurationFile=/etc/spark/mine.properties"}, False),
    ({}, True),  # under spark-submit the JVM is up already: --driver-java-options says it there
])
def test_a_log4j_config_of_the_users_own_is_left_alone(settings, gateway, monkeypatch):
    assert _java_options(settings, monkeypatch, gateway) is None


def test_a_new_configuration_forgets_the_fields_an_earlier_command_bound(captured):
    """main() runs more than once in one process (tests, an embedding scheduler): the second
    command's lines must not carry the first one's job, batch and state."""
    captured()
    logs.bind(job="first", batch_id=2, state="COMMITTED")
    captured()
    assert logs.bound() == {}


def test_lines_go_to_the_stderr_of_the_moment_not_one_closed_since(captured, monkeypatch):
    """A test runner (or an embedding scheduler) swaps sys.stderr per command and closes the old
    one: the next command's lines must reach the new stream, with no "Logging error"."""
    first, second = io.StringIO(), io.StringIO()
    monkeypatch.setattr("sys.stderr", first)
    root, saved = logging.getLogger(), list(logging.getLogger().handlers)
    try:
        logs.configure(logs.Verbosity.NORMAL, logs.LogFormat.TEXT)
        first.close()
        monkeypatch.setattr("sys.stderr", second)
        logging.getLogger("etl.job.driver").warning("after the swap")
    finally:
        root.handlers[:] = saved
    assert "Logging error" not in second.getvalue()
    assert [line[2] for line in _lines(second)] == ["after the swap"]


# What pyspark.errors.exceptions.base does when an exception with a query context is made (an
# AnalysisException, say, also one the job catches): its own logger, its own JSON on stderr.
PYSPARK_LOGS = """
import sys
from etl import logs
logs.configure("normal", sys.argv[1])
from pyspark.logger import PySparkLogger
logger = PySparkLogger.getLogger("SQLQueryContextLogger")
logger.propagate = False
try:
    raise ValueError("from the JVM")
except ValueError:
    logger.exception("[TABLE_OR_VIEW_NOT_FOUND] no table t", errorClass="TABLE_OR_VIEW_NOT_FOUND")
"""


def _pyspark_logs(log_format: str) -> list[str]:
    import subprocess
    import sys
    pytest.importorskip("pyspark.logger", reason="PySpark's own loggers are new in Spark 4.0: 3.5 writes no such lines")
    done = subprocess.run([sys.executable, "-c", PYSPARK_LOGS, log_format], capture_output=True, text=True,
                          timeout=120, env={k: v for k, v in os.environ.items() if k != logs.FORMAT_ENV})
    assert done.returncode == 0, done.stderr
    return done.stderr.splitlines()


def test_pysparks_own_lines_print_as_text_in_text_mode():
    first, *traceback = _pyspark_logs("text")
    assert TEXT_LINE.match(first).groups() == ("ERROR", "SQLQueryContextLogger", "[TABLE_OR_VIEW_NOT_FOUND] no table t")
    assert not any(line.startswith("{") for line in traceback), traceback


def test_pysparks_own_lines_follow_the_jobs_schema_in_json_mode():
    [line] = _pyspark_logs("json")
    record = json.loads(line)
    assert "msg" not in record and record["message"] == "[TABLE_OR_VIEW_NOT_FOUND] no table t", record
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", record["ts"]), record
    assert (record["level"], record["logger"]) == ("ERROR", "SQLQueryContextLogger")
    assert record["context"] == {"errorClass": "TABLE_OR_VIEW_NOT_FOUND"} and "from the JVM" in record["exc"]


def test_the_relay_puts_a_pyspark_json_line_into_the_jobs_schema():
    """A child's line in PySpark's schema (a Python worker's): `msg`, a local time without T or Z."""
    line = json.dumps({"ts": "2026-11-28 01:40:12.123", "level": "WARNING", "logger": "pyspark.worker", "msg": "slow",
                       "context": {"taskId": 3}, "exception": {"class": "ValueError", "msg": "bad", "stacktrace": [
                           {"class": None, "method": "f", "file": "w.py", "line": "7"}]}})
    record = json.loads(logs.wrapped(line, {"job": "j1"}))
    assert "msg" not in record and (record["message"], record["level"], record["job"]) == ("slow", "WARNING", "j1")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", record["ts"]), record
    assert record["context"] == {"taskId": 3} and "ValueError: bad" in record["exc"] and "w.py" in record["exc"]
    own = json.dumps({"ts": "2026-11-28T01:40:12.123Z", "level": "INFO", "logger": "etl", "message": "m"})
    assert logs.wrapped(own, {"job": "j1"}) == own  # the job's own records pass unchanged
