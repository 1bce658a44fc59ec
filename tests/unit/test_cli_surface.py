"""The command line as an operator and a log collector meet it, without the local stack: --help
says every default, usage and config errors are JSON records under --log-format json, the stderr
relay turns other programs' lines into records, the driver JVM's log4j2 JSON layout, and
`etl check`'s Nagios semantics (tests/integration/test_cli_operator.py has the real stack)."""
from __future__ import annotations

import argparse
import importlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest

from etl import cli, logs, spark_line
from etl.errors import Refused
from etl.hive.spark import DRIVER_LOG4J2
from etl.ops.acting import Act
from etl.ops.check import NagiosState, judge
from etl.ops.status import PartitionStatus
from tests.harness.config_file import TWO_ROUTES, minimal_ini, routed_ini

REPO = Path(__file__).resolve().parents[2]
JARS = Path(pyspark.__file__).parent / "jars"


def etl(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`python -m etl ...` of this tree, as a program."""
    run_env = {k: v for k, v in os.environ.items() if k != logs.FORMAT_ENV}
    return subprocess.run([sys.executable, "-m", "etl", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL, env={**run_env, **(env or {})})


def json_lines(text: str) -> list[dict]:
    """Every line parsed as a JSON object; a line that is not one fails the test, naming it."""
    records = []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            pytest.fail(f"not a JSON line: {line!r}\nin:\n{text}")
        assert isinstance(record, dict), line
        records.append(record)
    return records


def _all_parsers(parser: argparse.ArgumentParser, prefix: str = "etl"):
    yield prefix, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _all_parsers(sub, f"{prefix} {name}")


def test_help_shows_the_default_of_every_option_that_has_one():
    missing = []
    for name, parser in _all_parsers(cli._parser()):
        text = " ".join(parser.format_help().split())
        for action in parser._actions:
            default = action.default
            if not action.option_strings or action.nargs == 0 or default is None or default == argparse.SUPPRESS:
                continue  # a positional, a flag (off unless given), or no default
            if f"(default: {default})" not in text and "default" not in (action.help or ""):
                missing.append(f"{name} {action.option_strings[-1]} (default {default!r})")
    assert missing == []
    assert "(default: 60.0)" in " ".join(cli._parser()._subparsers._group_actions[0].choices["run"]
                                         .format_help().split())


def test_compact_takes_tables_by_name():
    compact = cli._parser()._subparsers._group_actions[0].choices["compact"]
    assert "--table TABLE" in compact.format_help()
    args = cli._parser().parse_args(["compact", "--config", "x.ini", "--table", "a", "--table", "rejects"])
    assert args.table == ["a", "rejects"]


# Each command that changes state, its options' module and function, and what else its line needs.
CHANGING = {"recover": ("etl.ops.recovery", "recover", []), "compact": ("etl.ops.compact", "run_compact", []),
            "bind": ("etl.ops.rebind", "bind", []),
            "reset-offsets": ("etl.ops.reset", "reset_offsets", ["--to", "latest"])}
OLD_FLAG = {"recover": "--dry-run", "compact": "--dry-run", "bind": "--yes", "reset-offsets": "--yes"}


@pytest.mark.parametrize("command", sorted(CHANGING))
@pytest.mark.parametrize("flags, act, warned", [
    ([], Act.PREVIEW, None), (["--execute"], Act.EXECUTE, None), (["old"], None, "old")])
def test_every_command_that_changes_state_previews_unless_given_execute(command, flags, act, warned, tmp_path,
                                                                         monkeypatch, caplog):
    """The old flag still works for one release (--yes acts, --dry-run previews), with a warning
    that names --execute; the options reach the command as one object."""
    module, function, more = CHANGING[command]
    given: list = []
    monkeypatch.setattr(importlib.import_module(module), function,
                        lambda config, options, **out: given.append(options) or 0)
    (tmp_path / "job.ini").write_text(minimal_ini(REPO / "warehouse_schema" / "events.sql"))
    old = OLD_FLAG[command]
    line = [command, "--config", str(tmp_path / "job.ini"), *more, *(old if flag == "old" else flag for flag in flags)]
    assert cli.main(line) == 0 and len(given) == 1
    expected = act or (Act.EXECUTE if old == "--yes" else Act.PREVIEW)
    assert given[0].act is expected
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    advice = "use --execute" if old == "--yes" else "a preview is the default now; --execute acts"
    assert warnings == ([] if warned is None else [f"{old} is deprecated and goes in the next release: {advice}"])


def test_a_refusal_under_json_prints_the_report_with_its_error_and_exits_with_its_code(tmp_path, monkeypatch, capsys):
    import etl.ops.reset

    def refuse(config, options, out, report):
        report.update(changes=[{"topic": "t", "partition": 0, "old": 50, "new": 20, "backwards": True}])
        out("t[0]: 50 -> 20  (backwards)")
        raise Refused("t[0] -> 20 is backwards over 2 committed files: pass --move-aside")
    monkeypatch.setattr(etl.ops.reset, "reset_offsets", refuse)
    (tmp_path / "job.ini").write_text(minimal_ini(REPO / "warehouse_schema" / "events.sql"))
    code = cli.main(["reset-offsets", "--config", str(tmp_path / "job.ini"), "--to", "t:0=20", "--execute", "--json"])
    shown, said = capsys.readouterr()
    report = json.loads(shown)
    assert code == 2 and report["exit_code"] == 2 and report["changes"][0]["new"] == 20
    assert report["messages"] == ["t[0]: 50 -> 20  (backwards)"]
    assert report["error"] == "t[0] -> 20 is backwards over 2 committed files: pass --move-aside; nothing changed"
    assert "etl: error: t[0] -> 20 is backwards" in said


@pytest.mark.parametrize("command", sorted(CHANGING))
def test_execute_and_the_old_flag_together_are_a_usage_error(command, capsys):
    with pytest.raises(SystemExit) as exited:
        cli._parser().parse_args([command, "--config", "x.ini", *CHANGING[command][2], "--execute", OLD_FLAG[command]])
    assert exited.value.code == 2 and "not allowed with argument" in capsys.readouterr().err


@pytest.mark.parametrize("args, env", [
    (["status", "--config", "x.ini", "--max-lag", "x", "--log-format", "json"], None),
    (["--log-format=json", "status", "--config", "x.ini", "--max-lag", "-1"], None),
    (["status", "--config", "x.ini", "--max-lag", "x"], {logs.FORMAT_ENV: "json"}),
    (["--log-format", "json", "no-such-command"], None),
    (["run", "--config", "x.ini", "--no-such-flag", "--log-format", "json"], None),
])
def test_a_usage_error_under_json_logs_is_one_json_record(args, env):
    done = etl(*args, env=env)
    assert done.returncode == 2, done.stderr
    [record] = json_lines(done.stderr)
    assert record["level"] == "ERROR" and record["exit_code"] == 2 and record["usage"].startswith("usage: etl")
    assert any(word in record["message"] for word in ("--max-lag", "no-such-command", "--no-such-flag"))


def test_a_usage_error_in_text_stays_argparses():
    done = etl("status", "--config", "x.ini", "--max-lag", "x")
    assert done.returncode == 2 and done.stderr.startswith("usage: etl status"), done.stderr
    assert "argument --max-lag: invalid" in done.stderr


def test_a_config_error_under_json_logs_is_a_json_record(tmp_path):
    done = etl("status", "--config", str(tmp_path / "missing.ini"), "--log-format", "json")
    assert done.returncode == 2, done.stderr
    [record] = json_lines(done.stderr)
    assert "missing.ini" in record["message"] and record["exit_code"] == 2


@pytest.mark.parametrize("module", ["etl", "etl.cli"])
def test_every_way_of_running_the_program_takes_a_config_with_routes(module, tmp_path):
    """`python -m etl.cli` runs cli.py as __main__: whatever main() reads must be defined by then."""
    (tmp_path / "routed.ini").write_text(routed_ini(TWO_ROUTES))
    run_env = {k: v for k, v in os.environ.items() if k != logs.FORMAT_ENV}
    done = subprocess.run([sys.executable, "-m", module, "config", "--config", str(tmp_path / "routed.ini")],
                          cwd=REPO, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, env=run_env)
    assert done.returncode == 0 and "[route orders]" in done.stdout, done.stderr
    done = subprocess.run([sys.executable, "-m", module, "schema", "suggest", "--config", str(tmp_path / "routed.ini")],
                          cwd=REPO, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, env=run_env)
    assert done.returncode == 2 and "etl schema suggest does not take [route] sections yet" in done.stderr, done.stderr


@pytest.mark.parametrize("args, says", [
    (["check", "--config", "x.ini", "--warn-lag", "5"], "the following arguments are required: --crit-lag"),
    (["check", "--config", "x.ini", "--warn-lag", "x", "--crit-lag", "5"], "--warn-lag"),
    (["check", "--config", "{missing}", "--warn-lag", "1", "--crit-lag", "5"], "missing.ini"),
])
def test_check_says_unknown_and_exits_3_on_a_usage_or_config_error(args, says, tmp_path):
    done = etl(*[a.replace("{missing}", str(tmp_path / "missing.ini")) for a in args])
    assert done.returncode == NagiosState.UNKNOWN, done
    [line] = done.stdout.splitlines()
    assert line.startswith("ETL UNKNOWN - ") and says in line, line


def test_checks_config_error_under_json_logs_records_the_exit_code_it_exits_with(tmp_path):
    """A plugin runner reads the exit code (3, UNKNOWN); a collector the record: they agree."""
    done = etl("check", "--config", str(tmp_path / "missing.ini"), "--warn-lag", "1", "--crit-lag", "5",
               "--log-format", "json")
    assert done.returncode == NagiosState.UNKNOWN, done
    [record] = json_lines(done.stderr)
    assert "missing.ini" in record["message"] and record["exit_code"] == NagiosState.UNKNOWN, record
    assert done.stdout.startswith("ETL UNKNOWN - ")


def _kafka_down_ini(tmp_path, request) -> str:
    """A job whose bootstrap address is a free loopback port: nothing listens there."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ini = minimal_ini(request.config.rootpath / "warehouse_schema" / "events.sql",
                      kafka="topics = a\nmetadata_timeout_seconds = 2")
    path = tmp_path / "job.ini"
    path.write_text(ini.replace("127.0.0.1:9092", f"127.0.0.1:{port}"))
    return str(path)


@pytest.mark.parametrize("command, code", [(["check", "--warn-lag", "1", "--crit-lag", "2"], NagiosState.UNKNOWN),
                                           (["status"], 75)])
def test_with_kafka_down_check_and_status_answer_in_one_line_without_librdkafkas(command, code, tmp_path, request):
    """Kafka asked once (a check that retries answers after its runner gave up), and librdkafka's
    connection failures, hundreds while it retries, summarised in the one error line."""
    done = etl(command[0], "--config", _kafka_down_ini(tmp_path, request), *command[1:])
    assert done.returncode == code, done
    [error] = done.stderr.splitlines()
    assert error.startswith("etl: error: Kafka did not answer") and "Connection refused" in error, error
    if code == NagiosState.UNKNOWN:
        [line] = done.stdout.splitlines()
        assert line.startswith("ETL UNKNOWN - Kafka did not answer"), line


def _lags(*lags: int) -> list[PartitionStatus]:
    return [PartitionStatus("clicks", p, 100, 0, 100 + lag) for p, lag in enumerate(lags)]


@pytest.mark.parametrize("lags, state", [((0, 10), NagiosState.OK), ((3, 11), NagiosState.WARNING),
                                         ((20, 3), NagiosState.WARNING), ((21, 3), NagiosState.CRITICAL)])
def test_check_judges_the_largest_lag_against_both_thresholds(lags, state):
    result = judge("clicks", _lags(*lags), warn_lag=10, crit_lag=20)
    assert result.state is state
    status, _, perfdata = result.line.partition(" | ")
    assert status.startswith(f"ETL {state.name} - job clicks: max lag {max(lags)} records")
    assert perfdata == f"max_lag={max(lags)};10;20;0; total_lag={sum(lags)};;;0;"


def test_check_of_a_job_without_partitions_is_ok():
    assert judge("clicks", [], 1, 2).line == \
        "ETL OK - job clicks: no partition to load | max_lag=0;1;2;0; total_lag=0;;;0;"


def test_a_partition_waiting_past_the_last_stable_offset_never_lags_below_zero_and_can_warn():
    """Committed at 34 under read_uncommitted; under read_committed Kafka's latest is the last
    stable offset, 17, and the log ends at 40: the 6 offsets past the committed one are its lag."""
    waiting = PartitionStatus("clicks", 0, 34, 0, 17, log_end=40)
    assert waiting.lag == 6 and waiting.waiting
    assert PartitionStatus("clicks", 0, 34, 0, 17).lag == 0  # the log end not asked: never negative
    assert judge("clicks", [waiting], warn_lag=5, crit_lag=20).state is NagiosState.WARNING


@pytest.mark.parametrize("line, level", [
    ("WARNING: Using incubator modules: jdk.incubator.vector", "WARNING"),
    ("%3|1764094000.123|FAIL|rdkafka#consumer-1| [thrd:x]: x: Connect failed", "ERROR"),
    ("%7|1764094000.123|DEBUG|rdkafka#consumer-1| a debug line", "DEBUG"),
    ("Traceback (most recent call last):", "ERROR"),
    ("some line", "WARNING"),
])
def test_the_relay_wraps_a_foreign_line_with_a_level_and_the_job(line, level):
    record = json.loads(logs.wrapped(line + "\n", {"job": "clicks"}))
    assert (record["level"], record["logger"], record["message"], record["job"]) == (level, "stderr", line, "clicks")


def test_the_relay_passes_a_json_record_unchanged():
    line = '{"ts": "2026-11-24T14:15:25.123Z", "level": "INFO", "logger": "etl", "message": "m"}'
    assert logs.wrapped(line + "\n", {"job": "x"}) == line


def test_the_relay_makes_every_line_the_process_and_its_children_write_to_stderr_json():
    """A real process: its own lines, librdkafka's (its C code writes to file descriptor 2: an
    admin client given a consumer-only key says CONFWARN), a child's raw lines as the JVM's
    launcher writes them, and a last line without a newline."""
    script = ("import subprocess, sys; from etl import logs; logs.relay_stderr({'job': 'clicks'});"
              "print('a line of python', file=sys.stderr, flush=True);"
              "from confluent_kafka.admin import AdminClient;"
              "AdminClient({'bootstrap.servers': '127.0.0.1:9', 'max.partition.fetch.bytes': '2097152'}).poll(0.5);"
              "subprocess.run(['sh', '-c', 'echo \"WARNING: Using incubator modules\" >&2; "
              "printf \"no newline\" >&2'])")
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    records = json_lines(done.stderr)
    messages = [r["message"] for r in records]
    assert messages[0] == "a line of python" and messages[-2:] == ["WARNING: Using incubator modules", "no newline"]
    [confwarn] = [r for r in records if "|CONFWARN|" in r["message"]]
    assert confwarn["level"] == "WARNING" and confwarn["logger"] == "stderr"
    assert {r["job"] for r in records} == {"clicks"}


DEMO = """
import org.apache.logging.log4j.LogManager;
public class Demo {
    public static void main(String[] args) {
        var log = LogManager.getLogger("org.apache.spark.SparkConf");
        log.info("an info line: the base config keeps only warnings and errors");
        log.warn("a warning with \\"quotes\\"\\nand a second line");
        log.error("an error", new IllegalStateException("boom"));
    }
}
"""


@pytest.mark.parametrize("line", [spark_line.SPARK_4, spark_line.SPARK_35], ids=lambda line: f"spark-{line.name}")
def test_the_driver_jvms_json_layout_writes_one_record_per_line(tmp_path, line):
    """The two log4j2 files as `etl run` hands them to the driver JVM with --log-format json, over
    the log4j jars the installed pyspark ships: 4.x's JSON overlay needs JsonTemplateLayout
    (log4j-layout-template-json, which pyspark 3.5 lacks), 3.5's runs on log4j-core alone."""
    if line is spark_line.SPARK_4 and not any(JARS.glob("log4j-layout-template-json-2*.jar")):
        pytest.skip(f"pyspark {pyspark.__version__} ships no JsonTemplateLayout: Spark 4's overlay cannot run on it")
    source = tmp_path / "Demo.java"
    source.write_text(DEMO)
    overlay = DRIVER_LOG4J2.with_name(line.driver_log4j2_json)
    jars = [str(jar) for jar in sorted(JARS.glob("log4j-*-2*.jar"))]
    done = subprocess.run(["java", "-cp", os.pathsep.join(jars),
                           f"-Dlog4j2.configurationFile={DRIVER_LOG4J2.as_uri()},{overlay.as_uri()}",
                           "-Detl.log.job=clicks", str(source)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    warning, error = json_lines(done.stderr)
    assert warning["level"] == "WARNING" and warning["message"] == 'a warning with "quotes"\nand a second line'
    assert warning["logger"] == "org.apache.spark.SparkConf" and warning["job"] == "clicks"
    assert warning["ts"].endswith("Z") and len(warning["ts"]) == len("2026-11-24T14:15:25.123Z")
    assert error["level"] == "ERROR" and "IllegalStateException: boom" in error["exc"] and "exc" not in warning


def test_an_uncaught_exception_under_json_logs_is_one_record_in_any_thread():
    script = ("import threading, warnings; from etl import logs; logs.configure(log_format='json'); logs.json_hooks();"
              "warnings.warn('a warning of the warnings module');"
              "t = threading.Thread(target=lambda: 1 / 0); t.start(); t.join();"
              "raise ValueError('boom')")
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    warning, in_thread, in_main = json_lines(done.stderr)
    assert warning["level"] == "WARNING" and "a warning of the warnings module" in warning["message"]
    assert in_thread["level"] == "CRITICAL" and "ZeroDivisionError" in in_thread["exc"]
    assert in_main["message"] == "uncaught ValueError: boom" and in_main["exc"].startswith("Traceback")
