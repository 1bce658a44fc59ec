"""Services secured by the tests' own KDC (tests/harness/kdc.py): an HDFS NameNode and DataNode
with Kerberos on RPC, block access tokens, SASL on the data transfer, and SPNEGO on WebHDFS.

They run from the same script as every other HDFS of the tests (scripts/stack/hdfs-node), whose
EXTRA.xml argument adds the security settings below and whose HDFS_JVM_OPTS points the JVMs at
the KDC's krb5.conf. No privileged ports: `ignore.secure.ports.for.testing` lets the DataNode
run without jsvc, with SASL (`dfs.data.transfer.protection`) protecting its block transfers.
"""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from tests.harness.etl_process import die_with_us
from tests.harness.hdfs import HDFS_NODE, PrivateHdfs
from tests.harness.kdc import REALM, Kdc
from tests.harness.services import PrivateMetastore

# The service principals are named after `localhost`, the host name every client is given
# (WebHDFS's SPNEGO asks for HTTP/<the URL's host>); the daemons themselves bind 127.0.0.1.
HDFS_PRINCIPAL = f"hdfs/localhost@{REALM}"
HTTP_PRINCIPAL = f"HTTP/localhost@{REALM}"
HIVE_PRINCIPAL = f"hive@{REALM}"


def _properties(values: dict[str, str]) -> str:
    return "".join(f"  <property><name>{name}</name><value>{value}</value></property>\n"
                   for name, value in values.items())


def secure_hdfs_settings(keytab: Path) -> dict[str, str]:
    """What turns the stack's HDFS into a kerberized one (both daemons read the same)."""
    return {
        "hadoop.security.authentication": "kerberos",
        "hadoop.security.authorization": "false",
        "dfs.namenode.kerberos.principal": HDFS_PRINCIPAL,
        "dfs.namenode.keytab.file": str(keytab),
        "dfs.datanode.kerberos.principal": HDFS_PRINCIPAL,
        "dfs.datanode.keytab.file": str(keytab),
        "dfs.web.authentication.kerberos.principal": HTTP_PRINCIPAL,
        "dfs.web.authentication.kerberos.keytab": str(keytab),
        # The NameNode's HTTP filter (WebHDFS, /jmx) reads hadoop.http.authentication.*, whose
        # type defaults to simple even on a secure cluster: SPNEGO for every request.
        "hadoop.http.authentication.type": "kerberos",
        "hadoop.http.authentication.kerberos.principal": HTTP_PRINCIPAL,
        "hadoop.http.authentication.kerberos.keytab": str(keytab),
        "hadoop.http.authentication.simple.anonymous.allowed": "false",
        # The auth cookie lives 20 s, not 10 h: a client that outlives its ticket must then log
        # in anew, which the renewal test needs to see.
        "hadoop.http.authentication.token.validity": "20",
        "dfs.block.access.token.enable": "true",
        "dfs.data.transfer.protection": "authentication",
        "ignore.secure.ports.for.testing": "true",
        "dfs.http.policy": "HTTP_ONLY",
        # These tests are about authentication: the ETL's principal creates its own warehouse
        # folder at the root, which only hdfs/localhost, this NameNode's superuser, may do with
        # permissions on (tests/integration/test_hdfs_faults.py covers permissions).
        "dfs.permissions.enabled": "false",
    }


class KerberizedHdfs(PrivateHdfs):
    """A private NameNode and DataNode secured by `kdc` (principals and keytab made here)."""

    def __init__(self, workdir: Path, kdc: Kdc):
        super().__init__(workdir)
        self.kdc = kdc
        self.keytab = kdc.keytabs / "hdfs-services.keytab"
        kdc.add_principal(HDFS_PRINCIPAL, self.keytab)
        kdc.add_principal(HTTP_PRINCIPAL, self.keytab)
        self.extra = self.workdir / "secure-site.xml"
        self.extra.write_text(_properties(secure_hdfs_settings(self.keytab)))
        # The test's own view of it (serving(), dfsadmin) goes through Hadoop's client too:
        # it logs in from the service keytab, like an HDFS administrator would.
        self.ccache = self.workdir / "admin.ccache"

    @property
    def env(self) -> dict[str, str]:
        return {**self.kdc.env, "HDFS_JVM_OPTS": f"-Djava.security.krb5.conf={self.kdc.krb5_conf}"}

    @property
    def webhdfs_url(self) -> str:
        """WebHDFS by the name its SPNEGO principal carries (HTTP/localhost)."""
        return f"webhdfs://localhost:{self.hdfs.http_port}"

    def filesystem_as(self, principal: str, keytab: Path):
        """The ETL's own WebHDFS filesystem, logged in from `keytab` (to read back what it wrote)."""
        from etl.config import WarehouseAuth, WarehouseConfig
        from etl.sink.fs.webhdfs import WebHdfsFileSystem
        os.environ.update(self.kdc.env)
        return WebHdfsFileSystem(WarehouseConfig(url=self.webhdfs_url, auth=WarehouseAuth.KERBEROS,
                                                 kerberos_principal=principal, kerberos_keytab=str(keytab),
                                                 timeout_seconds=30.0))

    def jmx(self, bean: str) -> dict:
        """The NameNode's /jmx through SPNEGO, as its administrator (hdfs/localhost, from the
        service keytab, in the harness's own ticket cache: never the ETL's)."""
        import requests
        from requests_kerberos import OPTIONAL, HTTPKerberosAuth
        if not self.ccache.exists():
            self.kdc.kinit(HDFS_PRINCIPAL, self.keytab, self.ccache)
        # gssapi reads both from the environment at each request. The ETL's runs are given
        # their own KRB5CCNAME (tests/integration/test_kerberos.py), so they never see this one.
        os.environ.update({**self.kdc.env, "KRB5CCNAME": f"FILE:{self.ccache}"})
        answer = requests.get(f"http://localhost:{self.hdfs.http_port}/jmx",
                              params={"qry": f"Hadoop:service=NameNode,name={bean}"}, timeout=10,
                              auth=HTTPKerberosAuth(mutual_authentication=OPTIONAL))
        answer.raise_for_status()
        beans = answer.json()["beans"]
        return beans[0] if beans else {}

    def serving(self) -> bool:
        try:
            return (self.jmx("NameNodeInfo").get("Safemode") == ""
                    and self.jmx("FSNamesystemState").get("NumLiveDataNodes", 0) >= 1)
        except OSError:
            return False

    def wait_serving(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not self.serving():
            for role, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"kerberized {role} exited ({proc.returncode}):\n{self.log(role)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"kerberized HDFS not serving after {timeout}s:\n{self.log('namenode')}\n"
                                   f"{self.log('datanode')}")
            time.sleep(0.3)

    def start(self, role: str) -> None:
        with open(self.workdir / f"{role}.log", "ab") as log:
            self.procs[role] = subprocess.Popen(
                die_with_us([str(HDFS_NODE), role, str(self.workdir), *map(str, self.ports), str(self.extra)]),
                stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True,
                env={**os.environ, **self.env})


def _site(settings: dict[str, str]) -> str:
    return f'<?xml version="1.0"?>\n<configuration>\n{_properties(settings)}</configuration>\n'


def hadoop_client_conf(folder: Path, hdfs_keytab: Path, **more: str) -> Path:
    """A HADOOP_CONF_DIR for a Hadoop client of the kerberized HDFS (the metastore, an analyst's
    Spark): Kerberos on, and the NameNode's principal and the data transfer's protection, which
    the client must know to reach the daemons."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "core-site.xml").write_text(_site({**secure_hdfs_settings(hdfs_keytab), **more}))
    return folder


class KerberizedMetastore(PrivateMetastore):
    """A private Hive metastore whose Hadoop client reaches the kerberized HDFS as hive@REALM,
    from a ticket cache kinit'ed from its keytab (the metastore creates and checks the table's
    and partitions' folders itself). Its Thrift port stays unauthenticated, like the shared one."""

    def __init__(self, workdir: Path, kdc: Kdc, hdfs: KerberizedHdfs):
        super().__init__(workdir)
        self.kdc, self.secure_hdfs = kdc, hdfs
        self.ccache = self.workdir / "hive.ccache"
        kdc.kinit(HIVE_PRINCIPAL, kdc.add_principal(HIVE_PRINCIPAL), self.ccache)

    def command(self) -> list[str]:
        command = super().command()
        hadoop_client_conf(self.workdir / "conf", self.secure_hdfs.keytab)
        # setugi off: the metastore touches HDFS as itself (hive, logged in), not as the remote
        # user name its Thrift client sent, which has no Kerberos credentials of its own.
        hive_site = self.workdir / "conf" / "hive-site.xml"
        hive_site.write_text(hive_site.read_text().replace("</configuration>", _properties(
            {"hive.metastore.execute.setugi": "false"}) + "</configuration>"))
        java = command.index("java")
        return ["env", f"KRB5CCNAME={self.ccache}", *(f"{k}={v}" for k, v in self.kdc.env.items()),
                *command[:java + 1], f"-Djava.security.krb5.conf={self.kdc.krb5_conf}", *command[java + 1:]]
