"""A kerberized YARN (one ResourceManager, one NodeManager) over the kerberized HDFS of
tests/harness/kerberized.py, for a `spark-submit --master yarn --principal --keytab` of the tests.

The daemons run from the same script as every other YARN of the tests (scripts/stack/yarn-node),
whose EXTRA.xml argument adds the security settings below and whose YARN_JVM_OPTS points the
JVMs at the KDC's krb5.conf. Kerberos is on for their RPC (rm/localhost and nm/localhost, keytabs
from the tests' KDC); the ResourceManager renews the applications' HDFS delegation tokens, so its
Hadoop client knows the kerberized HDFS's principals too. Choices a real secure cluster would
make differently:
- DefaultContainerExecutor: the containers run as the NodeManager's OS user. The
  LinuxContainerExecutor (each application as its Kerberos short name's OS user) needs the
  setuid `container-executor` binary of a Hadoop distribution, which Maven's jars do not carry.
- The daemons' web UIs and REST stay on `simple` HTTP authentication: the test reads the
  application's report from spark-submit and the containers' logs from the NodeManager's log
  folder, never a YARN web page, so SPNEGO there would be configured and never exercised.
- No log aggregation: the containers' logs stay in the NodeManager's folder, where the test
  reads them (yarn-node aggregates them to HDFS by default).
"""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from tests.harness.etl_process import die_with_us
from tests.harness.kdc import REALM, Kdc
from tests.harness.kerberized import KerberizedHdfs, _properties, secure_hdfs_settings
from tests.harness.paths import REPO
from tests.harness.ports import free_port, free_run
from tests.harness.services import stop_roles

YARN_NODE = REPO / "scripts" / "stack" / "yarn-node"
RM_PRINCIPAL = f"rm/localhost@{REALM}"
NM_PRINCIPAL = f"nm/localhost@{REALM}"


def secure_yarn_settings(hdfs_keytab: Path, yarn_keytab: Path) -> dict[str, str]:
    """What turns yarn-node's YARN into a kerberized one over the kerberized HDFS (the daemons
    and the client configuration the ResourceManager writes read the same)."""
    return {
        **secure_hdfs_settings(hdfs_keytab),
        "yarn.resourcemanager.principal": RM_PRINCIPAL,
        "yarn.resourcemanager.keytab": str(yarn_keytab),
        "yarn.nodemanager.principal": NM_PRINCIPAL,
        "yarn.nodemanager.keytab": str(yarn_keytab),
        "yarn.nodemanager.container-executor.class":
            "org.apache.hadoop.yarn.server.nodemanager.DefaultContainerExecutor",
        # YARN's web servers: simple (see the module's docstring); HDFS's keep SPNEGO.
        "hadoop.http.authentication.type": "simple",
        "hadoop.http.authentication.simple.anonymous.allowed": "true",
        "yarn.log-aggregation-enable": "false",
    }


class KerberizedYarn:
    """A private ResourceManager and NodeManager secured by `kdc`, over `hdfs` (principals and
    keytab made here)."""

    def __init__(self, workdir: Path, kdc: Kdc, hdfs: KerberizedHdfs):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.kdc, self.secure_hdfs = kdc, hdfs
        self.keytab = kdc.keytabs / "yarn-services.keytab"
        kdc.add_principal(RM_PRINCIPAL, self.keytab)
        kdc.add_principal(NM_PRINCIPAL, self.keytab)
        self.extra = self.workdir / "secure-site.xml"
        self.extra.write_text(_properties(secure_yarn_settings(hdfs.keytab, self.keytab)))
        self.rm_port, self.rm_web_port = free_run(4), free_port()  # yarn-node's RM uses RM_PORT..+3
        self.nm_ports = [free_port() for _ in range(3)]  # RPC, localizer, HTTP
        self.procs: dict[str, subprocess.Popen] = {}

    @property
    def client_conf(self) -> Path:
        """The HADOOP_CONF_DIR for spark-submit, written by yarn-node with the RM's settings."""
        return self.workdir / "conf-client"

    @property
    def container_logs(self) -> Path:
        return self.workdir / f"nm-{self.nm_ports[0]}" / "logs"

    def command(self, role: str) -> list[str]:
        ports = [self.rm_port, self.rm_web_port, *(self.nm_ports if role == "nodemanager" else [])]
        return [str(YARN_NODE), role, str(self.workdir), self.secure_hdfs.hdfs.hdfs_uri, *map(str, ports),
                str(self.extra)]

    def start(self, role: str) -> None:
        with open(self.workdir / f"{role}.log", "ab") as log:
            self.procs[role] = subprocess.Popen(
                die_with_us(self.command(role)), stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={**os.environ, **self.kdc.env, "YARN_JVM_OPTS": f"-Djava.security.krb5.conf={self.kdc.krb5_conf}"})

    def log(self, role: str) -> str:
        path = self.workdir / f"{role}.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def wait_serving(self, timeout: float = 120) -> None:
        """Until the ResourceManager has registered the NodeManager (its log says so: a
        NodeManager registers only after logging in from its keytab)."""
        deadline = time.monotonic() + timeout
        while "registered with capability" not in self.log("resourcemanager"):
            for role, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"kerberized {role} exited ({proc.returncode}):\n{self.log(role)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"kerberized YARN not serving after {timeout}s:\n"
                                   f"{self.log('resourcemanager')}\n{self.log('nodemanager')}")
            time.sleep(0.5)

    def stop(self) -> None:
        stop_roles(self.procs, ("nodemanager", "resourcemanager"))

    def __enter__(self) -> "KerberizedYarn":
        self.start("resourcemanager")
        self.start("nodemanager")
        try:
            self.wait_serving()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
