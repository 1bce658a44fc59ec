"""The wait for a venv that scripts/test builds in the background (tests/harness/side_venvs.py):
a cell waits while the build's shell lives, then fails with the build's log if it failed."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.harness import side_venvs


@pytest.fixture
def venv(tmp_path):
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "python").touch()
    return tmp_path / "venv"


def building(stack, name: str, seconds: float, rc: int) -> subprocess.Popen:
    """A build's shell as scripts/test starts it: its pid file now, its rc file when it ends."""
    ends = f"import time; time.sleep({seconds}); open({str(stack / f'{name}-venv.rc')!r}, 'w').write('{rc}\\n')"
    build = subprocess.Popen([sys.executable, "-c", ends])
    (stack / f"{name}-venv.pid").write_text(str(build.pid))
    (stack / f"{name}-venv.log").write_text(f"the {name} build's log\n")
    return build


def test_a_cell_waits_for_its_venv_s_build_to_end(tmp_path, venv):
    build = building(tmp_path, "gssapi", 1.0, 0)
    assert side_venvs.being_built("gssapi", tmp_path)
    started = time.monotonic()
    assert side_venvs.wait_for("gssapi", venv, tmp_path) == venv
    assert build.poll() == 0 and time.monotonic() - started >= 0.5
    assert not side_venvs.being_built("gssapi", tmp_path)


def test_a_failed_build_fails_the_cell_with_its_log(tmp_path, venv):
    building(tmp_path, "spark35", 0.1, 1).wait()
    with pytest.raises(pytest.fail.Exception,
                       match=r"scripts/spark35-venv failed \(exit 1\):\nthe spark35 build's log"):
        side_venvs.wait_for("spark35", venv, tmp_path)


def test_a_build_that_outlives_the_wait_fails_the_cell(tmp_path, venv):
    build = building(tmp_path, "airflow", 30, 0)
    try:
        with pytest.raises(pytest.fail.Exception, match="has not finished in 0 s"):
            side_venvs.wait_for("airflow", venv, tmp_path, timeout=0.3)
    finally:
        build.terminate()
        build.wait()


def test_without_scripts_test_a_missing_venv_fails_the_cell(tmp_path):
    assert not side_venvs.being_built("gssapi", tmp_path)
    with pytest.raises(pytest.fail.Exception, match="is missing: scripts/gssapi-venv installs it"):
        side_venvs.wait_for("gssapi", tmp_path / "nowhere", tmp_path)
