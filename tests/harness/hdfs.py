"""HDFS for the tests: the shared NameNode and DataNode (`scripts/local-stack up hdfs`), a test's
private pair (scripts/stack/hdfs-node, the same settings) that it may SIGKILL, SIGSTOP or put
in safe mode, Hadoop's own DFSAdmin, and a local copy of a warehouse on HDFS for the oracle.

The shared pair is started once per test session, by the first test that asks for it (the
`hdfs` fixture of tests/integration/conftest.py); a bare `scripts/local-stack up` never starts
it. ETL_TEST_HDFS=private gives that fixture a private pair instead, started for the session
(to try a change of scripts/stack/hdfs-node's settings without restarting the shared pair).

Permissions are on (scripts/stack/hdfs-node): the OS user that runs the daemons and the tests
is the HDFS superuser, and the ETL writes as JOB_USER, an ordinary user. A test's warehouse is
a folder the superuser created and gave to JOB_USER (Hdfs.job_folder), as an administrator
would. Faults that reach beyond a test's own folder (a killed daemon, safe mode) take a private
pair; a space quota is set on the test's own table folder, so the shared pair serves it.
"""
from __future__ import annotations

import fcntl
import getpass
import json
import posixpath
import subprocess
import time
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from tests.harness.etl_process import die_with_us
from tests.harness.kills import sigkill
from tests.harness.paths import REPO
from tests.harness.services import stop_roles
from tests.harness.stack import StackDown, _read_env_file

HDFS_NODE = REPO / "scripts" / "stack" / "hdfs-node"
JARS = REPO / ".stack" / "jars" / "hadoop"
SHARED_DIR = REPO / ".stack" / "hdfs"
DFSADMIN = "org.apache.hadoop.hdfs.tools.DFSAdmin"
JOB_USER = "etl"  # the HDFS user the ETL writes as ([warehouse] user): not the superuser


@dataclass(frozen=True)
class Hdfs:
    """One NameNode's addresses, on 127.0.0.1."""

    rpc_port: int  # hdfs://
    http_port: int  # WebHDFS and /jmx
    conf_dir: Path  # the NameNode's generated settings (and log4j.properties) for Hadoop's tools

    @property
    def webhdfs_url(self) -> str:
        return f"webhdfs://127.0.0.1:{self.http_port}"

    @property
    def hdfs_uri(self) -> str:
        return f"hdfs://127.0.0.1:{self.rpc_port}"

    def scratch(self, what: str) -> str:
        """A fresh folder path of a test's own (not created)."""
        return f"/etl-tests/{what}-{uuid.uuid4().hex[:12]}"

    def job_folder(self, what: str, owner: str = JOB_USER) -> str:
        """A fresh folder of a test's own (Hdfs.scratch), created by the superuser and given to
        `owner`, the job's user, as an administrator gives a job its warehouse folder."""
        path = self.scratch(what)
        admin = self.admin()
        admin.makedirs(path)
        admin.set_owner(path, owner=owner)
        return path

    def admin(self):
        """An HdfsCLI client as the HDFS superuser (the OS user that runs the daemons)."""
        from hdfs import InsecureClient
        return InsecureClient(f"http://127.0.0.1:{self.http_port}", user=getpass.getuser(), timeout=30)

    def put_public(self, archive: Path) -> str:
        """The packed environment put on this HDFS readable by all, as docs/cluster.md says to
        ship it; its hdfs:// URI. YARN localizes a resource as public, once for every
        application, only if others may read it and enter every folder above it."""
        path = f"/apps/kafka-hive-etl/{archive.name}"
        admin = self.admin()
        admin.upload(path, str(archive), overwrite=True)
        folders = [str(parent) for parent in PurePosixPath(path).parents]
        others = {where: int(admin.status(where)["permission"], 8) & 0o007 for where in (path, *folders)}
        assert others[path] & 0o004 and all(others[folder] & 0o001 for folder in folders), others
        return f"{self.hdfs_uri}{path}"

    def warehouse(self, root: str, **overrides: str) -> dict:
        """A [warehouse] section: the ETL writes `root` through WebHDFS, Hive reads it as hdfs://."""
        return {"url": f"{self.webhdfs_url}{root}", "hive_location": f"{self.hdfs_uri}{root}", "user": JOB_USER,
                "timeout_seconds": "30", **overrides}

    def filesystem(self, root: str = "/", user: str = JOB_USER):
        from etl.config import RetryConfig, WarehouseConfig
        from etl.sink.fs.webhdfs import WebHdfsFileSystem
        return WebHdfsFileSystem(WarehouseConfig(url=f"{self.webhdfs_url}{root}", user=user, timeout_seconds=30.0,
                                                 retry=RetryConfig(attempts=3, initial_wait_seconds=0.1,
                                                                   max_wait_seconds=0.5)))

    def jmx(self, bean: str) -> dict:
        url = f"http://127.0.0.1:{self.http_port}/jmx?qry=Hadoop:service=NameNode,name={bean}"
        with urllib.request.urlopen(url, timeout=5) as answer:
            beans = json.load(answer)["beans"]
        return beans[0] if beans else {}

    def serving(self) -> bool:
        """Out of safe mode, with a live DataNode: HDFS takes writes."""
        try:
            return (self.jmx("NameNodeInfo").get("Safemode") == ""
                    and self.jmx("FSNamesystemState").get("NumLiveDataNodes", 0) >= 1)
        except OSError:
            return False

    def dfsadmin(self, *args: str) -> subprocess.CompletedProcess:
        """Hadoop's `hdfs dfsadmin ARGS` against this NameNode; raises if it fails."""
        command = ["java", "-Xmx128m", "-XX:TieredStopAtLevel=1", "-cp", f"{self.conf_dir}:{JARS}/*", DFSADMIN,
                   "-fs", self.hdfs_uri, *args]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise AssertionError(f"dfsadmin {' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n"
                                 f"{done.stderr[-2000:]}")
        return done


def shared_hdfs() -> Hdfs:
    """The shared NameNode and DataNode, started by `scripts/local-stack up hdfs` if they are not
    running (the script waits until HDFS serves writes); StackDown if it cannot. One pytest worker
    at a time (tests.harness.parallel): two would both start the pair."""
    (REPO / ".stack").mkdir(exist_ok=True)
    with open(REPO / ".stack" / "hdfs-up.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = subprocess.run([str(REPO / "scripts" / "local-stack"), "up", "hdfs"], capture_output=True, text=True)
    if done.returncode != 0:
        raise StackDown(f"scripts/local-stack up hdfs failed:\n{done.stdout}\n{done.stderr}")
    env = _read_env_file(REPO / ".stack" / "env")
    rpc, http = env.get("ETL_HDFS_URI"), env.get("ETL_WEBHDFS_URL")
    if not rpc or not http:
        raise StackDown(".stack/env names no ETL_HDFS_URI / ETL_WEBHDFS_URL after scripts/local-stack up hdfs")
    return Hdfs(int(rpc.rpartition(":")[2]), int(http.rpartition(":")[2]), SHARED_DIR / "conf-namenode")


# A role's name in the suite's report of SIGKILLs (tests/harness/kills.py).
ROLE_NAMES = {"namenode": "NameNode", "datanode": "DataNode"}


class PrivateHdfs:
    """A NameNode and a DataNode of the test's own, on free ports, its data in `workdir`."""

    def __init__(self, workdir: Path):
        from tests.harness.ports import free_port
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.ports = [free_port() for _ in range(5)]  # NN RPC, NN HTTP, DN data, DN HTTP, DN IPC
        self.hdfs = Hdfs(self.ports[0], self.ports[1], self.workdir / "conf-namenode")
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, role: str) -> None:
        with open(self.workdir / f"{role}.log", "ab") as log:
            self.procs[role] = subprocess.Popen(
                die_with_us([str(HDFS_NODE), role, str(self.workdir), *map(str, self.ports)]), stdout=log,
                stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)

    def pid(self, role: str) -> int:
        return self.procs[role].pid

    def wait_serving(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not self.hdfs.serving():
            for role, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"private {role} exited ({proc.returncode}):\n{self.log(role)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"private HDFS not serving after {timeout}s:\n{self.log('namenode')}\n"
                                   f"{self.log('datanode')}")
            time.sleep(0.3)

    def log(self, role: str) -> str:
        path = self.workdir / f"{role}.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def kill(self, role: str) -> None:
        """SIGKILL the daemon, as a lost machine would, and reap it."""
        proc = self.procs.pop(role)
        sigkill(proc.pid, ROLE_NAMES.get(role, role))
        proc.wait(30)

    def stop(self) -> None:
        stop_roles(self.procs, ("datanode", "namenode"))

    def __enter__(self) -> "PrivateHdfs":
        self.start("namenode")
        self.start("datanode")
        try:
            self.wait_serving()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def copy_to_local(fs, root: str, local: Path) -> Path:
    """Every file under `root` on HDFS copied to the same relative path under `local`, so that
    the oracle's checks of files on disk (tests/harness/warehouse_files.py) read them."""
    local.mkdir(parents=True, exist_ok=True)
    for path in fs.walk_files(root):
        target = local / posixpath.relpath(path, root)
        target.parent.mkdir(parents=True, exist_ok=True)
        with fs.open_read(path) as source:
            target.write_bytes(source.read())
    return local
