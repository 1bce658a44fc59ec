"""A private Apache Kafka broker behind TLS and SASL: one KRaft node (tests/harness/services.py's
PrivateBroker, so scripts/stack/kafka-node's settings) with a listener of each kind a job may be
given, all at once, and a CA of the test's own (tests/harness/certificates.py) that signed its
certificates.

| listener    | protocol | what the client needs                                           |
|-------------|----------|-----------------------------------------------------------------|
| PLAINTEXT   | PLAINTEXT| nothing: the test's own setup (topics, the SCRAM user)          |
| TLS         | SSL      | the CA                                                          |
| MTLS        | SSL      | the CA and a client certificate it signed (ssl.client.auth)     |
| SCRAM       | SASL_SSL | the CA, user etl and its password (SCRAM-SHA-512, kafka-configs)|
| PLAIN       | SASL_SSL | the CA, user etl and its password (PLAIN, the listener's JAAS)  |
| OAUTH       | SASL_SSL | the CA, client etl and its secret (OAUTHBEARER by OIDC: a token |
|             |          | from the harness's endpoint, tests/harness/oauth.py)           |
| WRONGHOST   | SSL      | (a certificate for elsewhere.invalid only: clients refuse it)   |
| EXPIRED     | SSL      | (a certificate that expired yesterday: clients refuse it)       |

ACLs are on (StandardAuthorizer): a topic or group that a test restricts with `grant_only` is
refused to every other principal; the rest stay open, as `allow.everyone.if.no.acl.found` has it.

The SCRAM user is made as an operator makes one, with Kafka's own `kafka-configs` (its
ConfigCommand class, from the broker's jars). Usable without pytest.
"""
from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tests.harness.certificates import Issued, TestCa
from tests.harness.kafka_tools import KAFKA_JARS
from tests.harness.oauth import TokenEndpoint
from tests.harness.ports import free_port, port_open
from tests.harness.services import PrivateBroker

USER = "etl"
PASSWORD = "etl-secret-7f3a"  # the SCRAM and PLAIN users', and the OAuth client's secret
KEY_PASSWORD = "client-key-secret"  # the client certificate's key is encrypted with it
CONFIG_COMMAND = "org.apache.kafka.tools.ConfigCommand"  # kafka-configs.sh
JVM_OPTS = "-Xms64m -Xmx384m"  # after kafka-node's own, so these win: the broker holds a few topics


@dataclass(frozen=True)
class Listener:
    name: str
    protocol: str
    mechanism: str | None = None  # SASL's
    client_certificate: bool = False  # ssl.client.auth = required


LISTENERS = {listener.name: listener for listener in (
    Listener("TLS", "SSL"),
    Listener("MTLS", "SSL", client_certificate=True),
    Listener("SCRAM", "SASL_SSL", "SCRAM-SHA-512"),
    Listener("PLAIN", "SASL_SSL", "PLAIN"),
    Listener("OAUTH", "SASL_SSL", "OAUTHBEARER"),
    Listener("WRONGHOST", "SSL"),
    Listener("EXPIRED", "SSL"),
)}


class SecureBroker(PrivateBroker):
    """The broker, its CA (`ca`) and the client certificate it trusts (`client_cert`)."""

    def __init__(self, workdir: Path):
        workdir = Path(workdir)
        self.ca = TestCa(workdir / "pki")
        self.broker_cert = self.ca.issue("broker", hosts=("127.0.0.1", "localhost"))
        self.wrong_host_cert = self.ca.issue("elsewhere", hosts=("elsewhere.invalid",))
        self.expired_cert = self.ca.issue("expired", days=-1)
        self.client_cert = self.ca.issue("client", hosts=(), key_password=KEY_PASSWORD)
        self.ports = {name: free_port() for name in LISTENERS}
        self.token_endpoint = TokenEndpoint(USER, PASSWORD)
        extra = workdir / "secure.properties"
        super().__init__(workdir, extra=extra, jvm_opts=JVM_OPTS)
        extra.write_text(self._settings())

    def _settings(self) -> str:
        addresses = ",".join(f"{name}://127.0.0.1:{port}" for name, port in self.ports.items())
        protocols = ",".join(f"{name}:{listener.protocol}" for name, listener in LISTENERS.items())
        lines = [
            f"listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port},{addresses}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port},{addresses}",
            f"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,{protocols}",
            "inter.broker.listener.name=PLAINTEXT",
            *_pem_keystore("", self.broker_cert),
            "ssl.truststore.type=PEM",
            f"ssl.truststore.location={self.ca.cert}",
            "ssl.client.auth=none",
            "listener.name.mtls.ssl.client.auth=required",
            *_pem_keystore("listener.name.wronghost.", self.wrong_host_cert),
            *_pem_keystore("listener.name.expired.", self.expired_cert),
            "sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN,OAUTHBEARER",
            "listener.name.scram.sasl.enabled.mechanisms=SCRAM-SHA-512",
            "listener.name.scram.scram-sha-512.sasl.jaas.config="
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            "listener.name.plain.sasl.enabled.mechanisms=PLAIN",
            "listener.name.plain.plain.sasl.jaas.config="
            f'org.apache.kafka.common.security.plain.PlainLoginModule required user_{USER}="{PASSWORD}";',
            # Kafka's unsecured validator: it takes the endpoint's unsigned tokens (their sub, exp).
            "listener.name.oauth.sasl.enabled.mechanisms=OAUTHBEARER",
            "listener.name.oauth.oauthbearer.sasl.jaas.config="
            'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
            'unsecuredLoginStringClaim_sub="broker";',
            "listener.name.oauth.oauthbearer.sasl.server.callback.handler.class="
            "org.apache.kafka.common.security.oauthbearer.internals.unsecured."
            "OAuthBearerUnsecuredValidatorCallbackHandler",
            # ACLs: what a test restricts (grant_only) is refused to everyone else; a topic or group
            # without ACLs stays open, and the listeners without a user (PLAINTEXT, the controller's,
            # TLS without a client certificate) act as the operator.
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found=true",
            "super.users=User:ANONYMOUS",
        ]
        return "\n".join(lines) + "\n"

    def start(self, timeout: float = 180) -> "SecureBroker":
        if not self.token_endpoint.thread.is_alive():
            self.token_endpoint.start()
        super().start(timeout)
        deadline = time.monotonic() + 60
        while not all(map(port_open, self.ports.values())):
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the secure listeners did not open:\n{self.log_path.read_text()[-3000:]}")
            time.sleep(0.2)
        self._add_scram_user()
        return self

    def _add_scram_user(self) -> None:
        """`kafka-configs --alter --add-config SCRAM-SHA-512=[password=...] --entity-type users`,
        then wait until the SCRAM listener lets the user in (the credential travels through the
        KRaft metadata log)."""
        command = ["java", "-Xmx128m", "-XX:TieredStopAtLevel=1", "-cp", f"{KAFKA_JARS}/*", CONFIG_COMMAND,
                   "--bootstrap-server", self.bootstrap, "--alter", "--add-config",
                   f"SCRAM-SHA-512=[password={PASSWORD}]", "--entity-type", "users", "--entity-name", USER]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            raise RuntimeError(f"kafka-configs exited {done.returncode}:\n{done.stdout}{done.stderr}")
        from confluent_kafka.admin import AdminClient
        admin = AdminClient({**self.client("SCRAM"), "log_level": 0})
        deadline = time.monotonic() + 60
        while True:
            try:
                admin.list_topics(timeout=5)
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"user {USER} cannot log in over SCRAM-SHA-512 60 s after kafka-configs "
                                       f"added it:\n{done.stdout}")
                time.sleep(0.3)

    def stop(self) -> None:
        super().stop()
        if self.token_endpoint.thread.is_alive():
            self.token_endpoint.stop()

    def grant_only(self, resource: str, name: str, grants: dict[str, tuple[str, ...]]) -> None:
        """ACLs on a topic or group (`resource`: "topic" or "group") that allow each principal
        ("User:etl") the operations given ("READ", "DESCRIBE") and nobody else anything, made as
        an operator makes them (kafka-acls uses the same Admin API)."""
        from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                           ResourcePatternType, ResourceType)
        kind = {"topic": ResourceType.TOPIC, "group": ResourceType.GROUP}[resource]
        bindings = [AclBinding(kind, name, ResourcePatternType.LITERAL, principal, "*", AclOperation[operation],
                               AclPermissionType.ALLOW)
                    for principal, operations in grants.items() for operation in operations]
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        for future in admin.create_acls(bindings).values():
            future.result(60)

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def client(self, listener: str, password: str = PASSWORD, ca: Path | None = None) -> dict[str, str]:
        """librdkafka's settings for a client of `listener` (the secrets inline: a test's own
        producer; etl_settings writes them to files for the job)."""
        spec = LISTENERS[listener]
        settings = {"bootstrap.servers": self.address(listener), "security.protocol": spec.protocol,
                    "ssl.ca.location": str(ca or self.ca.cert)}
        if spec.mechanism == "OAUTHBEARER":
            settings.update({"sasl.mechanism": spec.mechanism, "sasl.oauthbearer.method": "oidc",
                             "sasl.oauthbearer.client.id": USER, "sasl.oauthbearer.client.secret": password,
                             "sasl.oauthbearer.token.endpoint.url": self.token_endpoint.url})
        elif spec.mechanism:
            settings.update({"sasl.mechanism": spec.mechanism, "sasl.username": USER, "sasl.password": password})
        if spec.client_certificate:
            settings.update({"ssl.certificate.location": str(self.client_cert.cert),
                             "ssl.key.location": str(self.client_cert.key), "ssl.key.password": KEY_PASSWORD})
        return settings

    def etl_settings(self, listener: str, folder: Path, password: str = PASSWORD,
                     ca: Path | None = None) -> dict[str, str]:
        """The job's [kafka] keys for `listener`, as docs/cluster.md ("Kafka (SASL, TLS)") has
        them: each secret in the file its `<key>_file` names (written to `folder`)."""
        settings = self.client(listener, password, ca)
        for key in ("sasl.password", "ssl.key.password", "sasl.oauthbearer.client.secret"):
            if key in settings:
                secret = Path(folder) / f"{listener.lower()}-{key.replace('.', '-')}"
                secret.write_text(settings.pop(key) + "\n")  # one line; the driver drops the line break
                settings[f"{key}_file"] = str(secret)
        return settings


def _pem_keystore(prefix: str, issued: Issued) -> list[str]:
    """A PEM key store (Kafka 2.7+): the key, unencrypted, and the certificate, in one file."""
    return [f"{prefix}ssl.keystore.type=PEM", f"{prefix}ssl.keystore.location={issued.bundle}"]
