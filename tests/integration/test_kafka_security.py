"""Kafka behind TLS and SASL, on Apache Kafka itself: a private broker (tests/harness/
secure_kafka.py) with a certificate of the test's own CA and a listener of each kind, started
once for this module and only when it runs.

Over each listener (SSL; SSL with a client certificate; SASL_SSL with SCRAM-SHA-512, its user
made by kafka-configs; SASL_SSL with PLAIN; SASL_SSL with OAUTHBEARER, its token from an OIDC
endpoint of the harness's own) a batch is produced and loaded by `etl run`, whose
[kafka] section is written as docs/cluster.md ("Kafka (SASL, TLS)") has it, secrets in their
`_file` keys. spark.master is local[2]: the driver plans and the tasks, in Spark's Python workers,
read, each with the same settings. Every offset lands once (the exactly-once oracle).

Then what the job must refuse, each at once (exit 2, not 75 after every retry), saying what is
wrong, with nothing written: a wrong SCRAM password, a broker certificate of another CA, one
for another host name, an expired one, and no client certificate where the listener requires
one. (These refusals' wording, and a refused OAuth client secret's, are unit-tested against a
plain TLS server in tests/unit/test_kafka_tls_refusals.py.)

With ACLs on (StandardAuthorizer), what the job's principal lacks ends the run with exit 1
naming the grant, nothing loaded: DESCRIBE on a topic, READ on a topic, READ on its consumer
group.

Not here: GSSAPI, which the confluent-kafka wheel cannot speak; test_kafka_gssapi.py runs it with
a client built for it (scripts/gssapi-venv).
"""
from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from etl.errors import EXIT_BATCH_FAILED, EXIT_USAGE
from tests.harness import kafka
from tests.harness.certificates import TestCa
from tests.harness.data import events_by_partition
from tests.harness.etl_process import run_etl
from tests.harness.oracle import check_exactly_once, expected_offsets, hive_reader
from tests.harness.secure_kafka import USER, SecureBroker
from tests.harness.state import job_state

pytestmark = [pytest.mark.slow,
              pytest.mark.cell("kafka-ssl", "kafka-mtls", "kafka-scram", "kafka-plain", "kafka-oauthbearer",
                               "kafka-acls")]

PER_PARTITION = 30
REFUSAL_METADATA_SECONDS = 5
# A refusal's whole run, command start included, has a bound (the first metadata request's
# timeout, not retried: a retried one exited 75, which the exit code sees): it never hangs.
REFUSAL_SECONDS = 60


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    started = time.monotonic()
    with SecureBroker(tmp_path_factory.mktemp("secure-kafka")) as server:
        print(f"[secure-kafka] broker with {len(server.ports)} secured listeners and its SCRAM user up in "
              f"{time.monotonic() - started:.1f}s")
        yield server


def topic_with_events(broker: SecureBroker, listener: str | None = None) -> str:
    """A new 2-partition topic of the private broker, PER_PARTITION events each, produced over
    `listener` with its security settings (None: the PLAINTEXT listener)."""
    topic = broker.create_topic(f"secure-{(listener or 'plaintext').lower()}-{uuid.uuid4().hex[:8]}", 2)
    if listener is None:
        kafka.produce(topic, events_by_partition(2, PER_PARTITION), bootstrap=broker.bootstrap)
    else:
        settings = broker.client(listener)
        kafka.produce(topic, events_by_partition(2, PER_PARTITION), bootstrap=settings.pop("bootstrap.servers"),
                      client=settings)
    return topic


@pytest.mark.parametrize("listener", ["TLS", "MTLS", "SCRAM", "PLAIN", "OAUTH"])
def test_a_batch_over_a_secured_listener_lands_every_offset_once(broker, listener, spark, write_config,
                                                                 warehouse_dir, tmp_path):
    topic = topic_with_events(broker, listener)
    kafka_keys = broker.etl_settings(listener, tmp_path)
    assert not {"sasl.password", "ssl.key.password", "sasl.oauthbearer.client.secret"} & set(kafka_keys)  # files
    config = write_config(kafka={"topics": topic, **kafka_keys})

    done = run_etl(config)
    assert done.returncode == 0, done.describe()
    report = check_exactly_once(hive_reader(spark), config, expected_offsets(topic, {0: PER_PARTITION,
                                                                                     1: PER_PARTITION}), warehouse_dir)
    assert report.rows == 2 * PER_PARTITION
    print(f"{listener}: {report.describe()}; etl run {done.seconds:.1f}s")


def refused_job(write_config, topic: str, kafka_keys: dict) -> Path:
    """The job's config, whose metadata requests time out after REFUSAL_METADATA_SECONDS: a
    refusal ends the first, where one retried would take them all."""
    return write_config(kafka={"topics": topic, "metadata_timeout_seconds": str(REFUSAL_METADATA_SECONDS),
                               **kafka_keys})


def assert_refused_and_nothing_written(config, warehouse_dir, expected: str, exit_code: int = EXIT_USAGE,
                                       planned: bool = False) -> str:
    """The run exits `exit_code` within REFUSAL_SECONDS, saying `expected`, and writes no file
    and commits nothing. `planned`: refused by a task, after its batch was planned (it stays
    PLANNED for the next run); else refused before any plan."""
    done = run_etl(config)
    assert done.returncode == exit_code, done.describe()
    assert expected in done.stderr, done.describe()
    assert done.seconds < REFUSAL_SECONDS, f"refused after {done.seconds:.1f}s:\n{done.describe()}"
    state = job_state(config)
    assert (state.last_batch_id is not None, state.committed) == (planned, {}), state
    written = [p for p in warehouse_dir.rglob("*") if p.is_file()] if warehouse_dir.exists() else []
    assert written == [], written
    message = next(line for line in done.stderr.splitlines() if expected in line)
    print(f"exit {done.returncode} after {done.seconds:.1f}s: {message}")
    return message


def test_a_wrong_scram_password_exits_2_naming_it_and_writes_nothing(broker, write_config, warehouse_dir, tmp_path):
    topic = topic_with_events(broker)
    config = refused_job(write_config, topic, broker.etl_settings("SCRAM", tmp_path, password="not-the-password"))
    message = assert_refused_and_nothing_written(
        config, warehouse_dir, f"[kafka] sasl.password: the broker at {broker.address('SCRAM')} refused the SASL "
                               f"credentials of sasl.username '{USER}' (sasl.mechanism SCRAM-SHA-512)")
    assert "not-the-password" not in message


def test_a_broker_certificate_of_another_ca_exits_2_naming_ssl_ca_location(broker, write_config, warehouse_dir,
                                                                           tmp_path):
    topic = topic_with_events(broker)
    other = TestCa(tmp_path / "other-ca", "other-ca")
    config = refused_job(write_config, topic, broker.etl_settings("TLS", tmp_path, ca=other.cert))
    assert_refused_and_nothing_written(
        config, warehouse_dir, f"[kafka] ssl.ca.location: the certificate of the broker at {broker.address('TLS')} "
                               f"is not signed by the CA in {other.cert} (unable to get local issuer certificate)")


def test_a_broker_certificate_for_another_host_exits_2_naming_bootstrap_servers(broker, write_config, warehouse_dir,
                                                                                tmp_path):
    topic = topic_with_events(broker)
    config = refused_job(write_config, topic, broker.etl_settings("WRONGHOST", tmp_path))
    assert_refused_and_nothing_written(
        config, warehouse_dir, f"[kafka] bootstrap.servers: the certificate of the broker at "
                               f"{broker.address('WRONGHOST')} is not valid for the host name 127.0.0.1")


def test_an_expired_broker_certificate_exits_2_saying_it_expired(broker, write_config, warehouse_dir, tmp_path):
    topic = topic_with_events(broker)
    config = refused_job(write_config, topic, broker.etl_settings("EXPIRED", tmp_path))
    assert_refused_and_nothing_written(
        config, warehouse_dir, f"the certificate of the broker at {broker.address('EXPIRED')} has expired")


def test_a_client_without_the_certificate_the_listener_requires_exits_2_naming_ssl_certificate_location(
        broker, write_config, warehouse_dir, tmp_path):
    topic = topic_with_events(broker)
    keys = {key: value for key, value in broker.etl_settings("MTLS", tmp_path).items()
            if key not in ("ssl.certificate.location", "ssl.key.location", "ssl.key.password_file")}
    config = refused_job(write_config, topic, keys)
    assert_refused_and_nothing_written(
        config, warehouse_dir, f"[kafka] ssl.certificate.location: the broker at {broker.address('MTLS')} refused "
                               f"the TLS handshake, it does not accept a client without a certificate")


# ACLs (StandardAuthorizer): the job's principal (User:etl, over SCRAM) lacks one grant each time.
# The run ends at once with exit 1 naming the missing grant, not a stall retried into exit 75,
# and loads nothing. The topic's and the group's other principal is the operator's stand-in.
def acl_job(broker, write_config, tmp_path, topic: str) -> Path:
    return write_config(kafka={"topics": topic, "metadata_timeout_seconds": str(REFUSAL_METADATA_SECONDS),
                               "fetch_timeout_seconds": "20", **broker.etl_settings("SCRAM", tmp_path)})


def test_a_topic_the_job_may_not_describe_exits_1_naming_the_acl(broker, write_config, warehouse_dir, tmp_path):
    topic = topic_with_events(broker)
    broker.grant_only("topic", topic, {"User:someone-else": ("READ", "DESCRIBE")})
    assert_refused_and_nothing_written(acl_job(broker, write_config, tmp_path, topic), warehouse_dir,
                                       f"the broker refused the job's principal (sasl.username '{USER}') DESCRIBE "
                                       f"on topic '{topic}'", EXIT_BATCH_FAILED)


def test_a_topic_the_job_may_describe_but_not_read_exits_1_naming_the_acl(broker, write_config, warehouse_dir,
                                                                          tmp_path):
    topic = topic_with_events(broker)
    broker.grant_only("topic", topic, {"User:someone-else": ("READ", "DESCRIBE"), f"User:{USER}": ("DESCRIBE",)})
    assert_refused_and_nothing_written(acl_job(broker, write_config, tmp_path, topic), warehouse_dir,
                                       f"the broker refused the job's principal (sasl.username '{USER}') READ "
                                       f"on topic '{topic}'", EXIT_BATCH_FAILED, planned=True)


def test_a_consumer_group_the_job_may_not_use_exits_1_naming_the_acl_before_loading(broker, write_config,
                                                                                    warehouse_dir, tmp_path):
    from etl.config import load_config
    topic = topic_with_events(broker)
    config = acl_job(broker, write_config, tmp_path, topic)
    group = load_config(config).kafka.consumer_group
    broker.grant_only("group", group, {"User:someone-else": ("READ",)})
    message = assert_refused_and_nothing_written(config, warehouse_dir, f"the broker refused the job's principal "
                                                 f"(sasl.username '{USER}') READ on consumer group '{group}'",
                                                 EXIT_BATCH_FAILED)
    assert "[kafka] consumer_group" in message
