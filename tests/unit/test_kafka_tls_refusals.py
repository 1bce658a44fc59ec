"""A broker's certificate the job's Kafka client refuses (not signed by the CA in ssl.ca.location,
not valid for the host the job names, expired): the driver's first Kafka question fails at once
with a message that says which, exit 2, instead of retrying a broker that answered and exiting 75
("did not answer") with librdkafka's "certificate verify failed".

Likewise a client certificate the broker refuses (none, or one of another CA), and an OIDC token
endpoint (tests/harness/oauth.py) that refuses the client secret; one that does not answer is
transient, as before (75).

The broker here is a TLS server in this process (Python's ssl, with certificates of the tests' own
CA, tests/harness/certificates.py): the refusal happens in the TLS handshake, before any Kafka
request, so it needs no broker. The same refusals against Apache Kafka itself, and SASL's wrong
password, are in tests/integration/test_kafka_security.py."""
from __future__ import annotations

import socket
import ssl
import threading
import time

import pytest

from etl.config import RetryConfig
from etl.config.kafka import KafkaSettings
from etl.config.model import KafkaConfig
from etl.errors import EXIT_USAGE, KafkaAccessDenied
from etl.source.kafka import KafkaMetadata
from tests.harness.certificates import TestCa
from tests.harness.oauth import TokenEndpoint
from tests.harness.ports import free_port

METADATA_TIMEOUT = 2.0
RETRY = RetryConfig(attempts=2, initial_wait_seconds=0.1, max_wait_seconds=0.2)


class TlsServer:
    """Accepts connections on a free loopback port and completes TLS handshakes with `cert`,
    then closes them: what a client sees of a broker up to its first Kafka request."""

    def __init__(self, cert, key, client_ca=None):
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(cert, key)
        if client_ca is not None:  # ssl.client.auth = required, as a broker's
            self.context.load_verify_locations(client_ca)
            self.context.verify_mode = ssl.CERT_REQUIRED
        self.port = free_port()
        self.sock = socket.create_server(("127.0.0.1", self.port))
        self.sock.settimeout(0.2)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            try:
                conn.settimeout(2)
                with self.context.wrap_socket(conn, server_side=True) as tls:
                    tls.recv(1)  # TLS 1.3: the client's certificate is judged after its handshake ends
            except OSError:
                pass  # the client refused the handshake: that is the point
            finally:
                conn.close()

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(5)
        self.sock.close()


@pytest.fixture(scope="module")
def ca(tmp_path_factory):
    return TestCa(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def serve():
    servers = []

    def start(issued, client_ca=None) -> TlsServer:
        servers.append(TlsServer(issued.cert, issued.key, client_ca))
        return servers[-1]
    yield start
    for server in servers:
        server.stop()


def metadata(port: int, ca_file, **more: str) -> KafkaMetadata:
    client = KafkaSettings({"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL",
                            "ssl.ca.location": str(ca_file), **more})
    config = KafkaConfig(topics=("t",), client=client, admin_client=client, metadata_timeout_seconds=METADATA_TIMEOUT)
    return KafkaMetadata(config, RETRY, "job")


def refusal(kafka: KafkaMetadata) -> tuple[str, float]:
    """The refusal's message (a usage error: exit 2), and the seconds it took."""
    started = time.monotonic()
    try:
        with pytest.raises(KafkaAccessDenied) as refused:
            kafka.partitions(("t",))
    finally:
        kafka.close()
    assert refused.value.exit_code == EXIT_USAGE
    return str(refused.value), time.monotonic() - started


def test_a_broker_certificate_of_another_ca_names_ssl_ca_location_and_is_not_retried(ca, serve, tmp_path):
    server = serve(TestCa(tmp_path / "other", "other-ca").issue("broker"))
    message, seconds = refusal(metadata(server.port, ca.cert))
    assert f"[kafka] ssl.ca.location: the certificate of the broker at 127.0.0.1:{server.port} is not signed by " \
           f"the CA in {ca.cert}" in message, message
    assert "unable to get local issuer certificate" in message, message
    assert seconds < METADATA_TIMEOUT * 2, f"retried: {seconds:.1f}s"


def test_a_broker_certificate_for_another_host_names_the_host(ca, serve):
    server = serve(ca.issue("elsewhere", hosts=("elsewhere.invalid",)))
    message, _ = refusal(metadata(server.port, ca.cert))
    assert f"[kafka] bootstrap.servers: the certificate of the broker at 127.0.0.1:{server.port} is not valid for " \
           f"the host name 127.0.0.1" in message, message
    assert "subjectAltName" in message, message


def test_an_expired_broker_certificate_says_it_expired(ca, serve):
    server = serve(ca.issue("expired", days=-1))
    message, _ = refusal(metadata(server.port, ca.cert))
    assert f"the certificate of the broker at 127.0.0.1:{server.port} has expired" in message, message


def test_a_broker_that_requires_a_client_certificate_names_ssl_certificate_location(ca, serve):
    server = serve(ca.issue("broker"), client_ca=ca.cert)
    message, _ = refusal(metadata(server.port, ca.cert))
    assert f"[kafka] ssl.certificate.location: the broker at 127.0.0.1:{server.port} refused the TLS handshake, it " \
           f"does not accept a client without a certificate" in message, message
    assert "alert certificate required" in message, message


def test_a_client_certificate_the_broker_does_not_trust_is_named(ca, serve, tmp_path):
    server = serve(ca.issue("broker"), client_ca=ca.cert)
    stranger = TestCa(tmp_path / "other", "other-ca").issue("client", hosts=())
    message, _ = refusal(metadata(server.port, ca.cert, **{"ssl.certificate.location": str(stranger.cert),
                                                           "ssl.key.location": str(stranger.key)}))
    assert f"the broker at 127.0.0.1:{server.port} refused the TLS handshake, it does not accept the client " \
           f"certificate in {stranger.cert}" in message, message


def test_a_trusted_certificate_for_the_host_is_no_refusal(ca, serve):
    """The same server with a good certificate: no access error (it is no Kafka broker, so the
    metadata request itself fails, as Kafka unavailable)."""
    from etl.errors import KafkaUnavailable
    server = serve(ca.issue("broker"))
    kafka = metadata(server.port, ca.cert)
    try:
        with pytest.raises(KafkaUnavailable) as unavailable:
            kafka.partitions(("t",))
    finally:
        kafka.close()
    assert not isinstance(unavailable.value, KafkaAccessDenied)


def test_a_token_endpoint_that_refuses_the_client_secret_names_sasl_oauthbearer_client_secret(ca, serve):
    """SASL/OAUTHBEARER by OIDC: the client credentials go to the token endpoint, not the broker."""
    server = serve(ca.issue("broker"))
    with TokenEndpoint("etl", "the-secret") as endpoint:
        kafka = metadata(server.port, ca.cert, **{
            "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.client.id": "etl", "sasl.oauthbearer.client.secret": "not-the-secret",
            "sasl.oauthbearer.token.endpoint.url": endpoint.url})
        message, _ = refusal(kafka)
    assert f"[kafka] sasl.oauthbearer.client.secret: the token endpoint {endpoint.url} refused the client " \
           f"credentials of sasl.oauthbearer.client.id 'etl'" in message, message
    assert "invalid_client" in message and "not-the-secret" not in message, message
    assert endpoint.refused >= 1


def test_a_token_endpoint_that_does_not_answer_is_unavailable_not_a_refusal(ca, serve):
    """librdkafka reports it with the same code as a refusal (_AUTHENTICATION): the identity
    provider being down is transient (75), which only the OAuth error in a refusal tells apart."""
    from etl.errors import KafkaUnavailable
    server = serve(ca.issue("broker"))
    kafka = metadata(server.port, ca.cert, **{
        "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": "etl", "sasl.oauthbearer.client.secret": "s",
        "sasl.oauthbearer.token.endpoint.url": f"http://127.0.0.1:{free_port()}/token"})
    try:
        with pytest.raises(KafkaUnavailable) as unavailable:
            kafka.partitions(("t",))
    finally:
        kafka.close()
    assert not isinstance(unavailable.value, KafkaAccessDenied)
    assert "Could not connect to server" in str(unavailable.value), unavailable.value
