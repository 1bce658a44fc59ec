"""A real MIT Kerberos KDC for the Kerberos tests (Debian's krb5-kdc, installed by scripts/setup --tests),
in a private folder: its own krb5.conf, kdc.conf, database, realm and port on 127.0.0.1.

Nothing reads or writes /etc/krb5.conf: every Kerberos client and tool of a test (kinit,
kadmin.local, the JVMs, librdkafka, requests-kerberos) is pointed at this KDC through
KRB5_CONFIG and KRB5_KDC_PROFILE (`Kdc.env`) and, for a JVM, -Djava.security.krb5.conf.
Tickets live an hour, or less for a principal added with a shorter `max_life` (the renewal
test's client, so that a run outlives its tickets).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

from tests.harness.etl_process import die_with_us
from tests.harness.kills import CLEANUP, sigkill
from tests.harness.ports import free_port, port_open

REALM = "ETL.TEST"
KDC_BINARIES = ("krb5kdc", "kdb5_util", "kadmin.local", "kinit", "klist")


def _which(tool: str) -> str | None:
    return shutil.which(tool) or next((str(p) for p in (Path("/usr/sbin") / tool, Path("/usr/bin") / tool)
                                       if p.exists()), None)


def missing_tools() -> list[str]:
    """The MIT Kerberos programs this machine lacks (scripts/setup --tests installs them)."""
    return [tool for tool in KDC_BINARIES if _which(tool) is None]


class Kdc:
    """One KDC process (krb5kdc -n, in the foreground) and its admin tools, all in `workdir`."""

    def __init__(self, workdir: Path):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.krb5_conf = self.workdir / "krb5.conf"
        self.kdc_conf = self.workdir / "kdc.conf"
        self.keytabs = self.workdir / "keytabs"
        self.proc: subprocess.Popen | None = None

    @property
    def env(self) -> dict[str, str]:
        """What every Kerberos client of the tests needs in its environment."""
        return {"KRB5_CONFIG": str(self.krb5_conf), "KRB5_KDC_PROFILE": str(self.kdc_conf)}

    def _write_config(self) -> None:
        # dns_canonicalize_hostname = false and rdns = false: a service principal is named after
        # the host the client was given (localhost), never after a reverse lookup of 127.0.0.1.
        # udp_preference_limit = 1: TCP always (a renewal under a 2-core machine's load gets no
        # lost UDP datagram to retry).
        self.krb5_conf.write_text(f"""[libdefaults]
    default_realm = {REALM}
    dns_lookup_kdc = false
    dns_lookup_realm = false
    dns_canonicalize_hostname = false
    rdns = false
    ticket_lifetime = 1h
    renew_lifetime = 1h
    forwardable = true
    udp_preference_limit = 1
    default_ccache_name = FILE:{self.workdir}/ccache-default

[realms]
    {REALM} = {{
        kdc = 127.0.0.1:{self.port}
        admin_server = 127.0.0.1:{self.port}
    }}

[domain_realm]
    localhost = {REALM}
    127.0.0.1 = {REALM}
""")
        self.kdc_conf.write_text(f"""[kdcdefaults]
    kdc_listen = 127.0.0.1:{self.port}
    kdc_tcp_listen = 127.0.0.1:{self.port}

[realms]
    {REALM} = {{
        database_name = {self.workdir}/principal
        key_stash_file = {self.workdir}/stash
        acl_file = {self.workdir}/kadm5.acl
        max_life = 1h
        max_renewable_life = 1h
        supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
    }}

[logging]
    kdc = FILE:{self.workdir}/krb5kdc.log
""")
        (self.workdir / "kadm5.acl").write_text("")

    def _run(self, *args: str, input: str | None = None) -> str:
        result = subprocess.run([_which(args[0]) or args[0], *args[1:]], env={**os.environ, **self.env},
                                input=input, capture_output=True, text=True, timeout=60)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed (rc {result.returncode}): {result.stderr or result.stdout}")
        return result.stdout

    def start(self, timeout: float = 60) -> "Kdc":
        self._write_config()
        self._run("kdb5_util", "create", "-s", "-r", REALM, "-P", "kdc-master-password")
        self.keytabs.mkdir(exist_ok=True)
        log = open(self.workdir / "krb5kdc.stdout", "ab")
        # die_with_us: a session killed by a timeout must not leave its KDC running.
        command = [_which("krb5kdc"), "-n", "-r", REALM, "-P", str(self.workdir / "krb5kdc.pid")]
        self.proc = subprocess.Popen(die_with_us(command),
                                     env={**os.environ, **self.env}, stdout=log, stderr=log,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while not port_open(self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the KDC did not listen on 127.0.0.1:{self.port}:\n{self.log_text()}")
            time.sleep(0.1)
        return self

    def log_text(self) -> str:
        return "".join(p.read_text(errors="replace")[-3000:] for p in
                       (self.workdir / "krb5kdc.log", self.workdir / "krb5kdc.stdout") if p.exists())

    def add_principal(self, name: str, keytab: Path | None = None, max_life: str | None = None) -> Path:
        """A principal with a random key, exported to a keytab (its own unless given); its
        tickets live `max_life` (e.g. "40s") if given, else the realm's hour."""
        principal = name if "@" in name else f"{name}@{REALM}"
        keytab = keytab or self.keytabs / (principal.split("@")[0].replace("/", "_") + ".keytab")
        life = f"-maxlife {max_life} " if max_life else ""
        self._run("kadmin.local", "-r", REALM, "-q", f"addprinc -randkey {life}{principal}")
        self._run("kadmin.local", "-r", REALM, "-q", f"ktadd -k {keytab} {principal}")
        return keytab

    def authtimes(self, client: str, service: str) -> list[int]:
        """When the tickets were first got (authtime, epoch seconds) on which the KDC issued
        `client` a ticket for `service` (its log's ISSUE lines: AS_REQ for krbtgt, else TGS_REQ)."""
        log = self.workdir / "krb5kdc.log"
        pattern = re.compile(rf"ISSUE: authtime (\d+),.*, {re.escape(client)} for {re.escape(service)}$", re.M)
        return [int(found) for found in pattern.findall(log.read_text(errors="replace"))] if log.exists() else []

    def kinit(self, principal: str, keytab: Path, ccache: Path) -> None:
        principal = principal if "@" in principal else f"{principal}@{REALM}"
        self._run("kinit", "-k", "-t", str(keytab), "-c", f"FILE:{ccache}", principal)

    def klist(self, ccache: Path) -> str:
        return self._run("klist", "-c", f"FILE:{ccache}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                sigkill(self.proc.pid, "KDC", purpose=CLEANUP)
                self.proc.wait(20)

    def __enter__(self) -> "Kdc":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
