"""A Spark standalone cluster of the test session's own: a Master and two Workers of 1 core each
(scripts/stack/spark-node, the settings `scripts/local-stack up spark` runs), on free ports of
127.0.0.1, their work folders in the session's tmp. The `spark_standalone` fixture of
tests/integration/conftest.py starts it once per session, when a test first asks for it.

Where the executors ran is read from the cluster itself: each Worker unpacks an executor's files
into WORKDIR/work-<its UI port>/<app id>/<executor id>, and lists its executors, running and
finished, with their state, in its /json/.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

from tests.harness.etl_process import die_with_us
from tests.harness.kills import CLEANUP, sigkill
from tests.harness.paths import REPO
from tests.harness.ports import free_port

SPARK_NODE = REPO / "scripts" / "stack" / "spark-node"


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as answer:
        return json.load(answer)


class SparkStandalone:
    """The Master (spark://127.0.0.1:master_port) and two Workers, keyed by their web UI ports."""

    def __init__(self, workdir: Path):
        self.workdir = Path(workdir)
        self.master_port, self.master_ui_port = free_port(), free_port()
        self.worker_ui_ports = (free_port(), free_port())
        self.procs: dict[str, subprocess.Popen] = {}

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    def work_dir(self, ui_port: int) -> Path:
        return self.workdir / f"work-{ui_port}"

    def master_json(self) -> dict:
        return get_json(f"http://127.0.0.1:{self.master_ui_port}/json/")

    def worker_json(self, ui_port: int) -> dict:
        return get_json(f"http://127.0.0.1:{ui_port}/json/")

    def start(self, timeout: float = 120) -> None:
        self._launch("master", self.master_ui_port)
        for port in self.worker_ui_ports:
            self._launch(f"worker-{port}", port)
        deadline = time.monotonic() + timeout
        while self._alive_workers() < 2:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"spark {name} exited ({proc.returncode}):\n{self.log(name)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Spark Master counts {self._alive_workers()} ALIVE workers after "
                                   f"{timeout}s:\n{self.log('master')}")
            time.sleep(0.3)

    def _launch(self, name: str, ui_port: int) -> None:
        role = name.split("-")[0]
        with open(self.workdir / f"{name}.log", "ab") as log:
            self.procs[name] = subprocess.Popen(
                die_with_us([str(SPARK_NODE), role, str(self.workdir), str(self.master_port), str(ui_port)]),
                stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)

    def _alive_workers(self) -> int:
        try:
            return sum(w["state"] == "ALIVE" for w in self.master_json()["workers"])
        except OSError:
            return 0

    def log(self, name: str) -> str:
        path = self.workdir / f"{name}.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def executor_dirs(self, app_id: str) -> dict[int, list[Path]]:
        """Worker UI port -> the folders its executors of the app ran in."""
        return {port: sorted(p for p in (self.work_dir(port) / app_id).glob("*") if p.is_dir())
                for port in self.worker_ui_ports}

    def executors(self, app_id: str) -> dict[int, list[int]]:
        """Worker UI port -> the ids of its executors of the app (running and finished), from its /json/."""
        found = {}
        for port in self.worker_ui_ports:
            worker = self.worker_json(port)
            found[port] = sorted(e["id"] for e in worker["executors"] + worker["finishedexecutors"]
                                 if e["appid"] == app_id)
        return found

    def finished_states(self, app_id: str) -> dict[int, tuple[str, int]]:
        """Executor id -> (state, exit status) its Worker logged it finished with.

        ("EXITED", 137): SIGKILLed outside Spark. At the app's end the driver's StopExecutors and
        the Master's kill race: the executor exits 0 on its own or 143 on its Worker's SIGTERM, and
        the state is EXITED or KILLED by which the Worker saw first. A Worker's later "Unknown
        Executor" lines are not read."""
        pattern = re.compile(rf"(?<!Unknown )Executor {re.escape(app_id)}/(\d+) finished with state (\w+)"
                             r".* exitStatus (-?\d+)")
        return {int(m[1]): (m[2], int(m[3])) for port in self.worker_ui_ports
                for m in pattern.finditer((self.workdir / f"worker-{port}.log").read_text(errors="replace"))}

    def remove_app(self, app_id: str) -> None:
        """Free the app's unpacked archives (~300 MB an executor)."""
        for port in self.worker_ui_ports:
            shutil.rmtree(self.work_dir(port) / app_id, ignore_errors=True)

    def stop(self) -> None:
        for name in reversed(list(self.procs)):
            proc = self.procs.pop(name)
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    sigkill(proc.pid, f"Spark standalone {name}", purpose=CLEANUP)
                    proc.wait(30)
