"""Kafka over Kerberos (SASL GSSAPI), for real: a MIT KDC of the module's own (tests/harness/kdc.py,
the one the HDFS Kerberos tests run), a private Kafka 4.4 broker whose GSSAPI listener it
secures (tests/harness/kerberized_kafka.py), and the job from .venv-gssapi: confluent-kafka
compiled against a librdkafka built with Cyrus SASL (scripts/gssapi-venv, which scripts/test
runs). The job logs in from a keytab (sasl.kerberos.keytab) on the driver and in every task,
and each `etl` is given a ticket cache that does not exist, so that no ticket of the test's
stands in for the keytab.

Here: a first batch SIGKILLed while a task writes; `etl recover`, and a run of what came since; the
exactly-once oracle with `etl verify --deep` and the analysts' read through the Spark Thrift
Server. A keytab without the principal's key exits 2 naming it. A `--loop` that outlives its
tickets, Kafka's and HDFS's at once, batch after batch, is test_kerberos.py's; the PyPI wheel's refusal of GSSAPI,
tests/unit/test_config_security.py's.

The test reads the job's state with a sibling config of the same job on the broker's
PLAINTEXT listener: this process runs the wheel, which has no GSSAPI.
"""
from __future__ import annotations

import time
import uuid

import pytest

from tests.harness import kafka, kerberized_kafka
from tests.harness.data import events_by_partition
from tests.harness.etl_process import run_etl
from tests.harness.jdbc import offsets_reader
from tests.harness.kdc import REALM, Kdc
from tests.harness.kerberized_kafka import KerberizedBroker
from tests.harness.oracle import check_exactly_once, expected_offsets
from tests.harness.recovery import kill_mid_write
from tests.harness.state import job_state

pytestmark = [pytest.mark.slow, pytest.mark.cell("kafka-gssapi")]
WAITS_FOR_VENV = "gssapi"  # late in the suite (tests/conftest.py): scripts/test builds it meanwhile

PRINCIPAL = f"etl-kafka@{REALM}"


@pytest.fixture(scope="module")
def gssapi_venv():
    return kerberized_kafka.gssapi_venv()


@pytest.fixture(scope="module")
def kerberos_kafka(tmp_path_factory):
    """The KDC, the broker, and the job principal's keytab."""
    started = time.monotonic()
    with Kdc(tmp_path_factory.mktemp("kafka-kdc")) as kdc:
        keytab = kdc.add_principal(PRINCIPAL)
        with KerberizedBroker(tmp_path_factory.mktemp("kafka-gssapi"), kdc) as broker:
            print(f"[kafka-gssapi] KDC and broker up in {time.monotonic() - started:.1f}s")
            yield kdc, broker, keytab


def configs(write_config, broker, keytab, topic):
    """The job's config over GSSAPI, and the same job's on PLAINTEXT for this process's reads."""
    gssapi = write_config(kafka={"topics": topic, **broker.client(PRINCIPAL, keytab)},
                          zookeeper={"session_timeout_seconds": "4"})  # a dead run's lock goes quickly
    plain = write_config(kafka={"topics": topic, "bootstrap.servers": broker.bootstrap},
                         zookeeper={"session_timeout_seconds": "4"})
    return gssapi, plain


def etl_env(kdc, tmp_path) -> dict:
    """The KDC's krb5.conf, and a ticket cache that does not exist until librdkafka's kinit fills it."""
    return {**kdc.env, "KRB5CCNAME": f"FILE:{tmp_path / f'ccache-{uuid.uuid4().hex[:6]}'}"}


def test_a_first_batch_over_gssapi_killed_mid_write_recovers_and_every_offset_lands_once(
        gssapi_venv, kerberos_kafka, spark, zk, thrift_url, write_config, warehouse_dir, tmp_path):
    kdc, broker, keytab = kerberos_kafka
    topic = broker.create_topic(f"gssapi-{uuid.uuid4().hex[:8]}", 2)
    kafka.produce(topic, events_by_partition(2, 40), bootstrap=broker.bootstrap)
    config, state_config = configs(write_config, broker, keytab, topic)
    env = etl_env(kdc, tmp_path)
    kill_mid_write(config, topic, zk, env=env, venv=gssapi_venv, state_config=state_config)
    kafka.produce(topic, events_by_partition(2, 25, first_id=80), bootstrap=broker.bootstrap)
    for command, args in (("recover", ["--execute"]), ("run", [])):
        done = run_etl(config, *args, command=command, env=env, venv=gssapi_venv)
        assert done.returncode == 0, done.describe()
    verified = run_etl(config, "--deep", command="verify", env=env, venv=gssapi_venv)
    assert verified.returncode == 0, verified.describe()

    report = check_exactly_once(offsets_reader(spark._jvm, thrift_url), state_config,
                                expected_offsets(topic, {0: 65, 1: 65}), warehouse_dir, run_verify=False)
    assert report.rows == 130, report.describe()
    print(f"[kafka-gssapi] {report.describe().replace('etl verify --deep: not run', 'etl verify --deep: exit 0')}")


def test_a_keytab_without_the_principal_exits_2_naming_the_key_and_writes_nothing(
        gssapi_venv, kerberos_kafka, write_config, tmp_path):
    kdc, broker, _keytab = kerberos_kafka
    topic = broker.create_topic(f"gssapi-keytab-{uuid.uuid4().hex[:8]}", 1)
    kafka.produce(topic, events_by_partition(1, 5), bootstrap=broker.bootstrap)
    other = kdc.add_principal(f"someone-else-{uuid.uuid4().hex[:6]}@{REALM}")
    config, state_config = configs(write_config, broker, other, topic)
    result = run_etl(config, env=etl_env(kdc, tmp_path), venv=gssapi_venv)
    assert result.returncode == 2, result.describe()
    assert (f"[kafka] sasl.kerberos.keytab: the broker at {broker.gssapi_bootstrap} did not let in "
            f"sasl.kerberos.principal '{PRINCIPAL}' over Kerberos") in result.stderr, result.describe()
    assert f"klist -kt {other}" in result.stderr, result.describe()
    print(f"[kafka-gssapi] refused in {result.seconds:.1f}s: {result.stderr.strip().splitlines()[-1]}")
    assert job_state(state_config).committed == {}
