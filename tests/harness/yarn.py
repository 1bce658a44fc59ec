"""YARN for the tests: a ResourceManager and one NodeManager of Hadoop's own jars
(scripts/stack/yarn-node, the settings of `scripts/local-stack up yarn`) over a private HDFS pair
(tests/harness/hdfs.py), on free ports, started once per test session by the first test that asks
for it (the `yarn` fixture of tests/integration/test_yarn.py) and stopped at the session's end.

What the tests read of it: the ResourceManager's REST view of an application and its attempts,
the NodeManager's folders (each container's working folder, where the executors run, and its
logs), Hadoop's own `yarn application -status` and `yarn logs` (scripts/stack/yarn-cli), and the
processes of a container (by the CONTAINER_ID the NodeManager puts in their environment), so a
test can SIGKILL one.
"""
from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from pathlib import Path

from tests.harness.etl_process import die_with_us
from tests.harness.hdfs import PrivateHdfs
from tests.harness.kills import sigkill
from tests.harness.paths import REPO
from tests.harness.ports import free_port, free_run
from tests.harness.services import stop_roles

YARN_NODE = REPO / "scripts" / "stack" / "yarn-node"
YARN_CLI = REPO / "scripts" / "stack" / "yarn-cli"


class PrivateYarn:
    """A private HDFS pair, a ResourceManager and a NodeManager, their data in `workdir`."""

    def __init__(self, workdir: Path):
        self.workdir = Path(workdir)
        self.private_hdfs = PrivateHdfs(self.workdir / "hdfs")
        self.hdfs = self.private_hdfs.hdfs
        self.rm_port = free_run(4)  # the ResourceManager takes 4
        self.rm_web_port = free_port()
        self.nm_ports = [free_port() for _ in range(3)]  # RPC, localizer, HTTP
        self.procs: dict[str, subprocess.Popen] = {}

    @property
    def conf_dir(self) -> Path:
        """The HADOOP_CONF_DIR of a spark-submit --master yarn (written by the ResourceManager's yarn-node)."""
        return self.workdir / "yarn" / "conf-client"

    @property
    def nm_dir(self) -> Path:
        """The NodeManager's folders: local/usercache/USER/appcache/APP/CONTAINER (working folders), logs/."""
        return self.workdir / "yarn" / f"nm-{self.nm_ports[0]}"

    def start(self) -> None:
        self.private_hdfs.__enter__()
        try:
            self._start("resourcemanager")
            self._start("nodemanager", *self.nm_ports)
            self._wait_node_running()
        except BaseException:
            self.stop()
            raise

    def _start(self, role: str, *nm_ports: int) -> None:
        command = [str(YARN_NODE), role, str(self.workdir / "yarn"), self.hdfs.hdfs_uri, str(self.rm_port),
                   str(self.rm_web_port), *map(str, nm_ports)]
        with open(self.workdir / f"{role}.log", "ab") as log:
            self.procs[role] = subprocess.Popen(die_with_us(command), stdout=log, stderr=log,
                                                stdin=subprocess.DEVNULL, start_new_session=True)

    def _wait_node_running(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not any(n["state"] == "RUNNING" for n in self.nodes()):
            for role, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{role} exited ({proc.returncode}):\n{self.log(role)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"no RUNNING NodeManager after {timeout}s:\n{self.log('nodemanager')}")
            time.sleep(0.5)

    def log(self, role: str) -> str:
        path = self.workdir / f"{role}.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def rest(self, path: str) -> dict:
        """The ResourceManager's REST answer for /ws/v1/cluster/PATH."""
        url = f"http://127.0.0.1:{self.rm_web_port}/ws/v1/cluster/{path}"
        with urllib.request.urlopen(url, timeout=10) as answer:
            return json.load(answer)

    def nodes(self) -> list[dict]:
        try:
            return (self.rest("nodes").get("nodes") or {}).get("node", [])
        except OSError:
            return []

    def app(self, app_id: str) -> dict:
        """state, finalStatus, diagnostics, ... of one application."""
        return self.rest(f"apps/{app_id}")["app"]

    def attempts(self, app_id: str) -> list[dict]:
        return self.rest(f"apps/{app_id}/appattempts")["appAttempts"]["appAttempt"]

    def apps(self) -> list[dict]:
        return (self.rest("apps").get("apps") or {}).get("app", [])

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        """Hadoop's `yarn ARGS` (scripts/stack/yarn-cli) against this cluster."""
        env = {**os.environ, "HADOOP_CONF_DIR": str(self.conf_dir)}
        return subprocess.run([str(YARN_CLI), *args], env=env, capture_output=True, text=True, timeout=120)

    def stop(self) -> None:
        stop_roles(self.procs, ("nodemanager", "resourcemanager"))
        self.private_hdfs.stop()


def container_pids(container_id: str) -> list[int]:
    """The processes the NodeManager started for a container (its launch script, the JVM, the
    python workers): each has CONTAINER_ID in its environment."""
    wanted = f"CONTAINER_ID={container_id}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:  # gone, or not ours
            continue
        if wanted in environ.split(b"\0"):
            pids.append(int(entry.name))
    return pids


def kill_container(container_id: str, what: str = "YARN container") -> list[int]:
    """SIGKILL every process of the container at once (one kill of `what`), as a lost machine
    would; returns their pids."""
    pids = container_pids(container_id)
    sigkill(pids, what)
    return pids
