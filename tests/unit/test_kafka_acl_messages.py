"""What the job says when the broker's ACLs refuse it (etl.source.access.not_authorized) or a Kerberos
login fails (access_denied), and that
such a refusal reaches the range being read from a pack's shared consumer (etl.source.reused).
The broker's side: tests/integration/test_kafka_security.py (StandardAuthorizer)."""
from __future__ import annotations

from confluent_kafka import KafkaError, Message

from etl.errors import EXIT_BATCH_FAILED
from etl.source.access import access_denied, not_authorized, principal_of
from etl.source.reused import PackConsumer
from tests.harness.handed_out import HandedOut


def test_the_principal_is_named_as_the_jobs_kafka_keys_give_it():
    sasl = {"security.protocol": "SASL_SSL"}
    assert principal_of({**sasl, "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "etl"}) == "sasl.username 'etl'"
    assert principal_of({**sasl, "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.client.id": "c"}) == \
        "sasl.oauthbearer.client.id 'c'"
    assert principal_of({**sasl, "sasl.kerberos.principal": "etl@REALM"}) == "sasl.kerberos.principal 'etl@REALM'"
    assert principal_of({"security.protocol": "SSL", "ssl.certificate.location": "/c.pem"}) == \
        "the subject of the certificate in /c.pem"
    assert principal_of({}).startswith("ANONYMOUS")


def test_a_refusal_names_the_operation_the_resource_and_the_grant_and_exits_1():
    error = not_authorized({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "etl"},
                           "DESCRIBE", "topic", "clicks", grant=("DESCRIBE", "READ"))
    assert error.exit_code == EXIT_BATCH_FAILED
    assert str(error) == ("Kafka: the broker refused the job's principal (sasl.username 'etl') DESCRIBE on topic "
                          "'clicks': an operator grants it (kafka-acls --add --allow-principal User:<principal> "
                          "--operation DESCRIBE --operation READ --topic clicks). Nothing was loaded")


def test_a_kerberos_login_that_fails_names_the_keytab_and_the_principal_not_a_password():
    client = {"bootstrap.servers": "b1:9093", "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI",
              "sasl.kerberos.principal": "etl@REALM", "sasl.kerberos.keytab": "/etc/etl.keytab"}
    librdkafka = ("sasl_plaintext://b1:9093/bootstrap: Failed to initialize SASL authentication: SASL handshake "
                  "failed (start (-1)): SASL(-1): generic failure: GSSAPI Error: No credentials were supplied")
    message = str(access_denied(client, KafkaError(KafkaError._AUTHENTICATION, librdkafka)))
    assert message.startswith("[kafka] sasl.kerberos.keytab: the broker at b1:9093 did not let in "
                              "sasl.kerberos.principal 'etl@REALM' over Kerberos (sasl.kerberos.service.name "
                              "'kafka'): Failed to initialize SASL authentication"), message
    assert "klist -kt /etc/etl.keytab" in message and "kafka/b1" in message
    assert "password" not in message


def _error(topic, partition, code, offset=-1):
    return Message(topic=topic, partition=partition, offset=offset, error=KafkaError(code))


def test_a_refusal_of_no_open_range_reaches_the_range_being_read_and_another_partitions_end_does_not():
    pack = PackConsumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g"})
    pack._consumer = HandedOut([_error("t", 5, KafkaError.TOPIC_AUTHORIZATION_FAILED),
                                _error("t", 6, KafkaError._PARTITION_EOF, offset=99)])
    pack.open("t", 0, 0, 10)
    taken = pack.take("t", 0, 10, 0.0)
    assert [(m.partition(), m.error().code()) for m in taken] == [(5, KafkaError.TOPIC_AUTHORIZATION_FAILED)]
