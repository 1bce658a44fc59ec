"""The exit codes schedulers act on (etl.errors.EXIT_CODES), the part without the local stack:
a ZooKeeper that does not answer is worth a retry (75), a bad config is not (2), and which of the
ETL's errors are Retryable. tests/integration/test_exit_codes_stack.py has the rest."""
from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from etl import errors
from etl.cli import main
from etl.errors import EXIT_CODES, EXIT_RETRYABLE, EXIT_USAGE, Retryable
from etl.state.store import ZooKeeperUnavailable
from tests.harness.config_file import minimal_ini


def closed_port() -> int:
    """A loopback port nothing listens on: bound, then closed at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def ini(tmp_path, request):
    def write(**replace: str):
        schema = request.config.rootpath / "warehouse_schema" / "events.sql"
        text = minimal_ini(schema)
        for old, new in replace.items():
            text = text.replace(old, new)
        path = tmp_path / "job.ini"
        path.write_text(text)
        return str(path)
    return write


def unreachable_zookeeper(ini) -> str:
    return ini(**{"hosts = 127.0.0.1:2181": f"hosts = 127.0.0.1:{closed_port()}\nsession_timeout_seconds = 1"})


@pytest.mark.parametrize("command", [["run"], ["status", "--max-lag", "0"], ["history"]])
def test_zookeeper_unreachable_exits_75_a_retry_will_help(ini, command, capsys):
    assert main([*command, "--config", unreachable_zookeeper(ini)]) == EXIT_RETRYABLE
    assert "cannot connect to ZooKeeper" in capsys.readouterr().err


def test_python_dash_m_etl_exits_75_too(ini):
    done = subprocess.run([sys.executable, "-m", "etl", "run", "--config", unreachable_zookeeper(ini)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == EXIT_RETRYABLE, done.stderr[-2000:]


def test_a_bad_config_exits_2_before_anything_connects(ini, capsys):
    assert main(["run", "--config", ini(**{"[job]\n": "[job]\nno_such_key = 1\n"})]) == EXIT_USAGE
    assert "no_such_key" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["-1", "256", "x"])
def test_lock_held_exit_code_outside_0_to_255_is_a_usage_error(ini, value):
    with pytest.raises(SystemExit) as exited:
        main(["run", "--config", ini(), "--lock-held-exit-code", value])
    assert exited.value.code == EXIT_USAGE


def test_help_lists_every_exit_code(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    shown = capsys.readouterr().out
    for code, _ in EXIT_CODES:
        assert f"\n  {code:<4} " in shown, code


RETRYABLE = {"KafkaUnavailable", "KafkaStalled", "LockLost", "SchemaRegistryUnavailable", "HiveUnavailable",
             "WarehouseUnavailable", "TaskFailedRetryable", "PostgresUnavailable"}


def test_exactly_the_transient_errors_are_retryable():
    classes = {name: cls for name, cls in vars(errors).items()
               if isinstance(cls, type) and issubclass(cls, errors.EtlError) and cls not in (Retryable,)}
    found = {name for name, cls in classes.items() if issubclass(cls, Retryable)}
    assert found == RETRYABLE
    assert all(classes[name].exit_code == EXIT_RETRYABLE for name in RETRYABLE)
    assert issubclass(ZooKeeperUnavailable, Retryable)
    # the operator's errors keep 1, the config's 2
    assert errors.HiveError.exit_code == errors.KafkaReadError.exit_code == errors.StateConflict.exit_code == 1
    assert errors.ZooKeeperAccessDenied.exit_code == errors.SchemaError.exit_code == EXIT_USAGE
    assert errors.KafkaAccessDenied.exit_code == EXIT_USAGE  # a refused password or certificate: no retry helps


@pytest.mark.parametrize("raised, retryable", [
    ("etl.errors.KafkaStalled: t[0]: no progress for 5.0s at offset 12; is the broker up?", True),
    ("etl.errors.SchemaRegistryUnavailable: the Schema Registry at http://r did not answer", True),
    ("etl.errors.TransformError: the transform raised ValueError", False),
    ("etl.errors.KafkaReadError: t[0]: chunk offsets 5..3 are not strictly increasing", False),
    ("java.lang.OutOfMemoryError: Java heap space", False),
])
def test_a_failed_task_exits_as_its_own_error_would(raised, retryable):
    from etl.job.tasks import task_failure
    from etl.model.batch import Batch, BatchState
    batch = Batch(batch_id=3, state=BatchState.PLANNED, planned_at="", partition_values={}, ranges=())
    failure = task_failure(batch, RuntimeError(f"An error occurred while calling o1.collect.\n{raised}\n"))
    assert isinstance(failure, errors.TaskFailed)
    assert (failure.exit_code == EXIT_RETRYABLE) is retryable


@pytest.mark.parametrize("text, retryable", [
    ("org.apache.thrift.transport.TTransportException: java.net.ConnectException: Connection refused", True),
    ("MetaException(message:Could not connect to meta store using any of the URIs provided.", True),
    ("[TABLE_OR_VIEW_NOT_FOUND] The table or view `db`.`t` cannot be found.", False),
])
def test_a_metastore_that_does_not_answer_is_retryable_a_refusal_is_not(text, retryable):
    from etl.hive.registrar import _failure
    assert (_failure(RuntimeError(text)).exit_code == EXIT_RETRYABLE) is retryable
