"""The driver JVM's output relay (etl.hive.jvm_output): what a launched child writes reaches
stderr, never stdout, and the command's output ends when the command exits, though the child
lives on (as the driver JVM does for about 0.4 s of its exit)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

# The command: launches a child inside the relay block, which says a line on stdout and one on
# stderr and then sleeps for a minute; once the child has spoken, the command says its own line
# on stdout and exits.
COMMAND = textwrap.dedent("""
    import os, subprocess, sys, time
    from etl.hive.jvm_output import launched_into_a_relay
    ready = sys.argv[1]
    with launched_into_a_relay():
        child = subprocess.Popen(["sh", "-c", f"echo child-out; echo child-err >&2; touch {ready}; exec sleep 60"])
    while not os.path.exists(ready):
        time.sleep(0.01)
    print(f"command-out {child.pid}", flush=True)
""")


def test_a_launched_childs_output_reaches_stderr_and_the_commands_output_ends_with_the_command(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", COMMAND, str(tmp_path / "ready")], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
    # Before the relay, the child held the command's pipes: this waited until the child ended.
    stdout, stderr = holder.communicate(timeout=30)
    child_pid = int(stdout.split()[1])
    try:
        assert holder.returncode == 0, stderr
        assert stdout.splitlines() == [f"command-out {child_pid}"]  # the child's stdout line: not here
        assert "child-out" in stderr and "child-err" in stderr
        os.kill(child_pid, 0)  # the child still runs: the command's output ended without it
    finally:
        try:
            os.kill(child_pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
