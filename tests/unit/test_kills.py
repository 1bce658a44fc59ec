"""The SIGKILL recorder (tests/harness/kills.py) and the coverage line of the suite's report
(tests/conftest.py): a kill lands only on a live process, and the report counts what landed."""
from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.harness import kills
from tests.harness.kills import CLEANUP, ON_PURPOSE, Kill, sigkill
from tests.harness.paths import REPO

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def own_record(monkeypatch) -> list[Kill]:
    """These kills are the recorder's own test, not the suite's coverage: a list of their own."""
    record: list[Kill] = []
    monkeypatch.setattr(kills, "KILLS", record)
    return record


def test_a_kill_of_a_live_process_lands_and_is_recorded(own_record):
    sleep = subprocess.Popen(["sleep", "60"])
    try:
        assert sigkill(sleep.pid, "sleep") is True
        assert sleep.wait(10) == -signal.SIGKILL
    finally:
        if sleep.poll() is None:  # the kill under test did not land
            sigkill(sleep.pid, "sleep", purpose=CLEANUP)
            sleep.wait(10)
    assert own_record == [Kill("sleep", ON_PURPOSE, True)]


def test_a_kill_of_an_exited_and_reaped_process_does_not_land(own_record):
    done = subprocess.Popen(["true"])
    done.wait(10)
    assert sigkill(done.pid, "true", purpose=CLEANUP) is False
    assert own_record == [Kill("true", CLEANUP, False)]


def test_a_kill_of_a_zombie_does_not_land(own_record):
    """Exited, not yet reaped: the signal is delivered to nothing alive."""
    done = subprocess.Popen(["true"])
    try:
        _wait(lambda: _state(done.pid) == "Z", "the child is a zombie")
        assert sigkill(done.pid, "true") is False
    finally:
        assert done.wait(10) == 0
    assert own_record == [Kill("true", ON_PURPOSE, False)]


def test_a_process_group_and_several_targets_are_one_kill(own_record):
    group = subprocess.Popen(["sh", "-c", "sleep 60 & sleep 60; wait"], start_new_session=True)
    gone = subprocess.Popen(["true"], start_new_session=True)
    gone.wait(10)
    try:
        _wait(lambda: len(_group_members(group.pid)) == 3, "the shell and its two sleeps")
        members = _group_members(group.pid)
        assert sigkill([gone.pid, group.pid], "group", group=True) is True
        assert group.wait(10) == -signal.SIGKILL
        _wait(lambda: not _group_members(group.pid), f"every member of {members} killed")
    finally:
        if group.poll() is None:
            sigkill(group.pid, "group", group=True, purpose=CLEANUP)
            group.wait(10)
    assert own_record == [Kill("group", ON_PURPOSE, True)]


def test_the_report_counts_tests_by_outcome_skips_by_reason_and_kills_by_purpose(pytester, monkeypatch):
    """The suite's own conftest in a small session: kills on purpose, a cleanup kill, a kill of a
    process gone, a fault point's kill; tests passed, failed and skipped for two reasons."""
    pytester.makeconftest((REPO / "tests" / "conftest.py").read_text())
    pytester.makepyfile(test_small="""
        import subprocess
        import pytest
        from tests.harness.kills import CLEANUP, fault_point_landed, sigkill

        def kill_a_sleep(what, purpose):
            sleep = subprocess.Popen(["sleep", "60"])
            assert sigkill(sleep.pid, what, purpose=purpose)
            sleep.wait(10)

        def test_kills():
            kill_a_sleep("etl run", "on purpose")
            kill_a_sleep("etl run", "on purpose")
            kill_a_sleep("DataNode", "on purpose")
            kill_a_sleep("etl run's leftover", CLEANUP)
            gone = subprocess.Popen(["true"])
            gone.wait(10)
            assert not sigkill(gone.pid, "etl run")
            fault_point_landed("etl run")

        def test_fails():
            assert False

        @pytest.mark.skip(reason="Airflow is not installed")
        def test_airflow_1():
            pass

        @pytest.mark.skip(reason="Airflow is not installed")
        def test_airflow_2():
            pass

        def test_skipped_inside():
            pytest.skip("no YARN here")
    """)
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1, skipped=3)
    result.stdout.fnmatch_lines([
        "*= coverage: 5 tests run (1 passed, 1 failed, 3 skipped), SIGKILLs landed: 4 "
        "(etl run 2, DataNode 1, etl run (fault point) 1) =*",
        "    2 skipped: Airflow is not installed",
        "    1 skipped: no YARN here",
        "cleanup SIGKILLs landed (leftovers killed so that the next test starts clean, not coverage): 1 "
        "(etl run's leftover 1)",
        "SIGKILLs that found their target already gone: 1",
    ])


def _state(pid: int) -> str | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()[0]


def _group_members(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if entry.name.isdigit() and int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def _wait(predicate, what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{what}: not within {timeout}s"
        time.sleep(0.02)


CLUSTER_TESTS = """
import time
import pytest

@pytest.mark.parametrize("i", range(6))
def test_where(yarn, i):
    time.sleep(0.1)
    with open("{name}", "a") as f:
        f.write(f"{{yarn}}\\n")
"""


def test_on_two_workers_the_report_counts_every_workers_kills_and_a_cluster_module_runs_on_one(pytester, monkeypatch):
    """tests.harness.parallel: each worker's kills and etl processes reach the controller's report,
    and the modules that ask for a cluster fixture run as one group on one worker."""
    pytester.makeconftest((REPO / "tests" / "conftest.py").read_text() + '''

@pytest.fixture(scope="session")
def yarn():
    import os
    return os.getpid()


parallel.CLUSTER_MODULES = frozenset({"test_cluster_one.py", "test_cluster_two.py"})
''')
    body = """
        import os, subprocess
        from tests.harness.kills import sigkill

        def test_kills_one():
            sleep = subprocess.Popen(["sleep", "60"])
            assert sigkill(sleep.pid, "etl run")
            sleep.wait(10)
    """
    pytester.makepyfile(test_a=body, test_b=body.replace("etl run", "DataNode"),
                        test_cluster_one=CLUSTER_TESTS.format(name="one"),
                        test_cluster_two=CLUSTER_TESTS.format(name="two"))
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "--no-loadscope-reorder")
    result.assert_outcomes(passed=14)
    result.stdout.fnmatch_lines(["*= coverage: 14 tests run (14 passed, 0 failed, 0 skipped), SIGKILLs landed: 2 "
                                 "(DataNode 1, etl run 1) =*"])
    pids = {line for name in ("one", "two") for line in (pytester.path / name).read_text().split()}
    assert len(pids) == 1, pids  # one worker's session fixture served all twelve
