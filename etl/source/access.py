"""Why a broker that answered would not let the job in, said so that the operator knows what to
fix: the SASL credentials it refused (or the Kerberos login that failed), or the broker certificate
the client refused, and why.

librdkafka reports every refused broker certificate alike, "certificate verify failed: ... verify
that ssl.ca.location is correctly configured", also when the CA is right and the certificate is
for another host name, or has expired. OpenSSL's reason for the refusal is not passed on, so it is
asked again here, once: a TLS handshake with Python's ssl module (the same OpenSSL checks) with
the client's own CA and host name settings, whose verify error names the reason."""
from __future__ import annotations

import re
import socket
import ssl
from pathlib import Path
from typing import Callable, Mapping, Protocol, TypeVar

from confluent_kafka import KafkaError

from etl.errors import KafkaAccessDenied, KafkaNotAuthorized, KafkaUnavailable

T = TypeVar("T")

SASL_REFUSED = frozenset({KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED})
_BROKER = re.compile(r"^(?:\w+://)?\[?(?P<host>[^\s/\[\]]+?)\]?:(?P<port>\d+)/")
_AFTER = re.compile(r"\s*\(after \d+ms in state \w+(?:, \d+ identical error\(s\) suppressed)?\)\s*$")
# OpenSSL's X509_V_ERR_* codes (x509_vfy.h) of a certificate its CA file cannot vouch for.
_UNTRUSTED = frozenset({2, 7, 18, 19, 20, 21})
_EXPIRED = 10
_WRONG_HOST = frozenset({62, 64})  # X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH
_PROBE_SECONDS = 5.0
# librdkafka reports a token it could not get from the OIDC token endpoint as an authentication
# error, whether the endpoint refused the client (RFC 6749's error codes, in its answer) or did
# not answer at all, which is transient.
_TOKEN_FAILED = "Failed to acquire SASL OAUTHBEARER token"
_OAUTH_REFUSALS = re.compile(r"\b(invalid_client|unauthorized_client|invalid_grant|invalid_scope|access_denied)\b")


class _Heard(Protocol):
    def refusal(self) -> KafkaError | None: ...


def unrefused(fn: Callable[[], T], heard: _Heard, client: Mapping[str, str]) -> T:
    """fn(); a broker that did not answer it (KafkaUnavailable) after `heard` (the clients'
    etl.source.client_log.ClientLog) reported a refusal raises that refusal instead, which no
    retry gets past: a broker that answered, and refused the job's credentials, or the client
    refused its certificate."""
    try:
        return fn()
    except KafkaUnavailable as exc:
        refused = heard.refusal()
        if refused is not None:
            raise access_denied(client, refused) from exc
        raise


def is_refusal(error: KafkaError) -> bool:
    """Whether librdkafka's error is a broker or its certificate refusing the job's credentials,
    which no retry gets past (rather than a broker that did not answer)."""
    text = error.str()
    if error.code() in SASL_REFUSED:
        return _TOKEN_FAILED not in text or bool(_OAUTH_REFUSALS.search(text))
    return "certificate verify failed" in text or _broker_refused_our_certificate(text)


def _broker_refused_our_certificate(text: str) -> bool:
    """A TLS alert from the broker about the client's certificate ("tlsv13 alert certificate
    required", "sslv3 alert bad certificate", "tlsv1 alert unknown ca"). Under TLS 1.3 it comes
    after the client's handshake ended, so librdkafka reports it as a transport error."""
    lowered = text.lower()
    return " alert " in lowered and ("certificate" in lowered or "unknown ca" in lowered)


def access_denied(client: Mapping[str, str], error: KafkaError) -> KafkaAccessDenied:
    """The refusal `error` (is_refusal) as the error the operator reads: the key to fix, and why."""
    text = _AFTER.sub("", error.str())
    broker = _broker(text, client)
    where = f"the broker at {broker[0]}:{broker[1]}"
    reason = text.split(": ", 1)[1] if _BROKER.match(text) else text  # without the broker librdkafka names
    if error.code() in SASL_REFUSED and _TOKEN_FAILED in text:
        return KafkaAccessDenied(  # the token endpoint's refusal: the broker was never asked
            f"[kafka] sasl.oauthbearer.client.secret: the token endpoint "
            f"{client.get('sasl.oauthbearer.token.endpoint.url')} refused the client credentials of "
            f"sasl.oauthbearer.client.id {client.get('sasl.oauthbearer.client.id')!r}: {reason}; check "
            f"sasl.oauthbearer.client.id and the secret (sasl.oauthbearer.client.secret, or the file "
            f"sasl.oauthbearer.client.secret_file names)")
    if error.code() in SASL_REFUSED and client.get("sasl.mechanism", "GSSAPI").upper() == "GSSAPI":
        return _kerberos_refused(client, broker[0], where, reason)
    if error.code() in SASL_REFUSED:
        return KafkaAccessDenied(
            f"[kafka] sasl.password: {where} refused the SASL credentials of sasl.username "
            f"{client.get('sasl.username')!r} (sasl.mechanism {client.get('sasl.mechanism', 'GSSAPI')}): {reason}; "
            f"check sasl.username and the password (sasl.password, or the file sasl.password_file names)")
    if "certificate verify failed" in text:
        return _certificate_refused(client, broker, where, reason)
    mine = client.get("ssl.certificate.location")
    return KafkaAccessDenied(
        f"[kafka] ssl.certificate.location: {where} refused the TLS handshake, it does not accept "
        + (f"the client certificate in {mine}" if mine else "a client without a certificate (set "
           "ssl.certificate.location and ssl.key.location to one its CA signed)")
        + f": {reason}")


def _kerberos_refused(client: Mapping[str, str], host: str, where: str, reason: str) -> KafkaAccessDenied:
    """A GSSAPI login that failed: most often librdkafka's kinit got no ticket from the keytab
    (its own lines on stderr say why), else the KDC knows no service principal for the broker."""
    principal, keytab = client.get("sasl.kerberos.principal", "kafkaclient"), client.get("sasl.kerberos.keytab")
    service = client.get("sasl.kerberos.service.name", "kafka")
    check = (f"that sasl.kerberos.keytab holds the key of sasl.kerberos.principal (klist -kt {keytab}) and that the "
             f"KDC gives it a ticket (kinit -kt {keytab} {principal})" if keytab else
             "that the ticket cache holds a ticket (klist), or set sasl.kerberos.keytab")
    return KafkaAccessDenied(
        f"[kafka] sasl.kerberos.keytab: {where} did not let in sasl.kerberos.principal {principal!r} over Kerberos "
        f"(sasl.kerberos.service.name {service!r}): {reason}; check {check}, and that the KDC knows the broker's "
        f"service principal {service}/{host}")


def _broker(text: str, client: Mapping[str, str]) -> tuple[str, int]:
    """The broker librdkafka names in `text`, else the first of bootstrap.servers."""
    named = _BROKER.match(text)
    if named:
        return named["host"], int(named["port"])
    first = client.get("bootstrap.servers", "").split(",")[0].strip()
    first = first.split("://")[-1]
    host, _, port = first.rpartition(":")
    return host.strip("[]"), int(port) if port.isdigit() else 9092


def _certificate_refused(client: Mapping[str, str], broker: tuple[str, int], where: str,
                         text: str) -> KafkaAccessDenied:
    failed = _verify(client, broker)
    if failed is None:  # the check here passed, or could not connect: librdkafka's words alone
        return KafkaAccessDenied(f"[kafka] ssl.ca.location: the certificate of {where} was refused: {text}")
    code, message = failed.verify_code, failed.verify_message
    if code == _EXPIRED:
        return KafkaAccessDenied(f"Kafka: the certificate of {where} has expired ({message}); the broker needs a "
                                 f"renewed certificate")
    if code in _WRONG_HOST:
        return KafkaAccessDenied(
            f"[kafka] bootstrap.servers: the certificate of {where} is not valid for the host name {broker[0]} "
            f"({message}); name the brokers by a host name or address their certificates' subjectAltName "
            f"holds")
    ca = client.get("ssl.ca.location")
    if code in _UNTRUSTED:
        whose = f"the CA in {ca}" if ca and ca != "probe" else "a CA this machine trusts (ssl.ca.location is not set)"
        return KafkaAccessDenied(
            f"[kafka] ssl.ca.location: the certificate of {where} is not signed by {whose} ({message}); set "
            f"ssl.ca.location to the CA certificate that signed the brokers' certificates")
    return KafkaAccessDenied(f"[kafka] ssl.ca.location: the certificate of {where} was refused: {message}")


def _verify(client: Mapping[str, str], broker: tuple[str, int]) -> ssl.SSLCertVerificationError | None:
    """OpenSSL's verdict on the broker's certificate, under the client's CA and host name
    settings; None when it accepts it, or the broker cannot be reached from here."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = client.get("ssl.endpoint.identification.algorithm", "https").lower() != "none"
    ca = client.get("ssl.ca.location")
    try:
        if client.get("ssl.ca.pem"):
            context.load_verify_locations(cadata=client["ssl.ca.pem"])
        elif ca and ca != "probe":
            context.load_verify_locations(capath=ca) if Path(ca).is_dir() else context.load_verify_locations(cafile=ca)
        else:
            context.load_default_certs()
        with socket.create_connection(broker, timeout=_PROBE_SECONDS) as sock:
            with context.wrap_socket(sock, server_hostname=broker[0]):
                return None
    except ssl.SSLCertVerificationError as failed:
        return failed
    except (OSError, ValueError):
        return None


def not_authorized(client: Mapping[str, str], refused: str, resource: str, name: str, grant: tuple[str, ...] = (),
                   note: str = "", remedy: str = "") -> KafkaNotAuthorized:
    """The broker's ACLs refused the job's principal the operation `refused` on a `resource`
    ("topic", "consumer group") named `name`: who was refused, and the kafka-acls line that grants
    what it needs (`grant`, by default the refused operation alone)."""
    flag = "--topic" if resource == "topic" else "--group"
    operations = " ".join(f"--operation {operation}" for operation in grant or (refused,))
    return KafkaNotAuthorized(
        f"Kafka: the broker refused the job's principal ({principal_of(client)}) {refused} on {resource} "
        f"{name!r}{note}: an operator grants it (kafka-acls --add --allow-principal User:<principal> {operations} "
        f"{flag} {name}){remedy}. Nothing was loaded")


def principal_of(client: Mapping[str, str]) -> str:
    """Whom the broker sees, as the job's [kafka] keys say it."""
    if client.get("security.protocol", "PLAINTEXT").upper().startswith("SASL"):
        mechanism = client.get("sasl.mechanism", "GSSAPI").upper()
        if mechanism == "OAUTHBEARER":
            return f"sasl.oauthbearer.client.id {client.get('sasl.oauthbearer.client.id')!r}"
        if mechanism == "GSSAPI":
            return f"sasl.kerberos.principal {client.get('sasl.kerberos.principal', 'kafkaclient')!r}"
        return f"sasl.username {client.get('sasl.username')!r}"
    if client.get("ssl.certificate.location"):
        return f"the subject of the certificate in {client['ssl.certificate.location']}"
    return "ANONYMOUS: no SASL and no client certificate"
