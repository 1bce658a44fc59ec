"""A private Apache Kafka broker with a SASL GSSAPI (Kerberos) listener: one KRaft node
(tests/harness/services.py's PrivateBroker, so scripts/stack/kafka-node's settings) whose
listener GSSAPI takes SASL_PLAINTEXT with Kerberos tickets of a real MIT KDC
(tests/harness/kdc.py). Its service principal is kafka/127.0.0.1, the host the listener
advertises, as a client names the service it asks a ticket for. PLAINTEXT stays, for the
test's own setup (topics, records) and its reads of the job's state.
"""
from __future__ import annotations

import time
from pathlib import Path

from tests.harness import side_venvs
from tests.harness.kdc import REALM, Kdc
from tests.harness.paths import REPO
from tests.harness.ports import free_port, port_open
from tests.harness.services import PrivateBroker

SERVICE = "kafka"
GSSAPI_VENV = REPO / ".venv-gssapi"  # the job with a client that speaks GSSAPI (scripts/gssapi-venv)
JVM_OPTS = "-Xms64m -Xmx384m"  # after kafka-node's own, so these win: the broker holds a few topics


class KerberizedBroker(PrivateBroker):
    """The broker and its GSSAPI listener at `gssapi_bootstrap`."""

    def __init__(self, workdir: Path, kdc: Kdc):
        workdir = Path(workdir)
        self.kdc = kdc
        self.gssapi_port = free_port()
        self.service_principal = f"{SERVICE}/127.0.0.1@{REALM}"
        extra = workdir / "gssapi.properties"
        super().__init__(workdir, extra=extra, jvm_opts=f"{JVM_OPTS} -Djava.security.krb5.conf={kdc.krb5_conf}")
        keytab = kdc.add_principal(self.service_principal)
        extra.write_text(self._settings(keytab))

    @property
    def gssapi_bootstrap(self) -> str:
        return f"127.0.0.1:{self.gssapi_port}"

    def _settings(self, keytab: Path) -> str:
        return "\n".join([
            f"listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port},"
            f"GSSAPI://127.0.0.1:{self.gssapi_port}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port},GSSAPI://127.0.0.1:{self.gssapi_port}",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,GSSAPI:SASL_PLAINTEXT",
            "inter.broker.listener.name=PLAINTEXT",
            "sasl.enabled.mechanisms=GSSAPI",
            f"sasl.kerberos.service.name={SERVICE}",
            "listener.name.gssapi.gssapi.sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required "
            f'useKeyTab=true storeKey=true keyTab="{keytab}" principal="{self.service_principal}";',
        ]) + "\n"

    def start(self, timeout: float = 180) -> "KerberizedBroker":
        super().start(timeout)
        deadline = time.monotonic() + 60
        while not port_open(self.gssapi_port):
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the GSSAPI listener did not open:\n{self.log_path.read_text()[-3000:]}")
            time.sleep(0.2)
        return self

    def client(self, principal: str, keytab: Path) -> dict[str, str]:
        """The [kafka] keys of a job that logs in as `principal` from `keytab` (librdkafka runs
        kinit with them at start and again every sasl.kerberos.min.time.before.relogin)."""
        return {"bootstrap.servers": self.gssapi_bootstrap, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "GSSAPI", "sasl.kerberos.service.name": SERVICE,
                "sasl.kerberos.principal": principal, "sasl.kerberos.keytab": str(keytab)}


def gssapi_venv() -> Path:
    """.venv-gssapi, once scripts/test's build of it has ended (scripts/gssapi-venv); a test fails
    without it."""
    return side_venvs.wait_for("gssapi", GSSAPI_VENV)
