"""Kerberos for real: a MIT KDC of the tests' own (tests/harness/kdc.py), an HDFS NameNode and
DataNode secured by it (Kerberos RPC, block access tokens, SASL data transfer, SPNEGO on
WebHDFS), and a Hive metastore whose Hadoop client logs in to that HDFS.

The ETL authenticates from a keytab ([warehouse] kerberos_keytab) on the driver and the
executors: each `etl` process is given a ticket cache that does not exist, so the test's own
tickets cannot stand in for the keytab. The loop reads Kafka over Kerberos too: a private
broker's GSSAPI listener secured by the same KDC (tests/harness/kerberized_kafka.py), the job
from .venv-gssapi (scripts/gssapi-venv), the same principal and keytab for both. The KDC and the
secured services start once per test session, and only when these tests run (`-m kerberos`
selects them).

A batch, a SIGKILL and recovery over Kafka's GSSAPI listener: test_kafka_gssapi.py.
"""
from __future__ import annotations

import time
import uuid

import pytest

from tests.harness import kafka
from tests.harness.data import events_by_partition
from tests.harness.etl_process import EtlProcess, run_etl
from tests.harness.hdfs import copy_to_local
from tests.harness.kdc import REALM
from tests.harness.kerberized import hadoop_client_conf
from tests.harness.kerberized_kafka import KerberizedBroker, gssapi_venv
from tests.harness.oracle import check_exactly_once, expected_offsets
from tests.harness.services import read_tables_via
from tests.harness.state import job_state

pytestmark = [pytest.mark.kerberos, pytest.mark.slow, pytest.mark.cell("hdfs-kerberos")]

DB = "etl_test"
ETL_PRINCIPAL = f"etl@{REALM}"
TICKET_LIFE_SECONDS = 30  # the ETL principal's tickets; the NameNode's auth cookie lives 20 s
RELOGIN_MS = "10000"  # librdkafka's kinit every 10 s (its default, 60 s, would outlast these tickets)


@pytest.fixture(scope="session")
def etl_keytab(kdc):
    return kdc.add_principal(ETL_PRINCIPAL, max_life=f"{TICKET_LIFE_SECONDS}s")


@pytest.fixture(scope="module")
def gssapi_broker(kdc, tmp_path_factory):
    with KerberizedBroker(tmp_path_factory.mktemp("kafka-gssapi"), kdc) as broker:
        yield broker


def kerberized_config(write_config, topic, secure_hdfs, secure_metastore, keytab, root, kafka_keys=None):
    return write_config(
        kafka={"topics": topic, **(kafka_keys or {})},
        warehouse={"url": f"{secure_hdfs.webhdfs_url}{root}", "hive_location": f"{secure_hdfs.hdfs.hdfs_uri}{root}",
                   "auth": "kerberos", "kerberos_principal": ETL_PRINCIPAL, "kerberos_keytab": str(keytab),
                   "timeout_seconds": "30"},
        hive={"metastore": secure_metastore.uri})


def etl_env(kdc, tmp_path) -> dict:
    """The KDC's krb5.conf, and a ticket cache that does not exist: the keytab is the only way in."""
    return {**kdc.env, "KRB5CCNAME": f"FILE:{tmp_path / 'no-such-ccache'}"}


def read_back(kdc, secure_hdfs, secure_metastore, monkeypatch, tmp_path):
    """The tables read through Hive SQL by a Spark of the analysts' kind: the private metastore,
    and a Hadoop client that logs in to HDFS as hive (its ticket cache), like the metastore."""
    conf = hadoop_client_conf(tmp_path / "analyst-conf", secure_hdfs.keytab)
    monkeypatch.setenv("HADOOP_CONF_DIR", str(conf))
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", f"-Djava.security.krb5.conf={kdc.krb5_conf}")
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{secure_metastore.ccache}")

    def read_table(database: str, table: str):
        return read_tables_via(secure_metastore.uri, "file:///tmp/unused-warehouse", database, [table])[table]
    return read_table


@pytest.mark.cell("kafka-gssapi")
def test_a_loop_from_kafka_over_gssapi_to_a_kerberized_webhdfs_outlives_its_tickets_and_loads_exactly_once(
        kdc, secure_hdfs, secure_metastore, etl_keytab, gssapi_broker, write_config, tmp_path, monkeypatch):
    topic = gssapi_broker.create_topic(f"kerberos-loop-{uuid.uuid4().hex[:8]}", 2)
    kafka.produce(topic, events_by_partition(2, 50), bootstrap=gssapi_broker.bootstrap)
    root = secure_hdfs.hdfs.scratch("warehouse")
    gssapi = {**gssapi_broker.client(ETL_PRINCIPAL, etl_keytab), "sasl.kerberos.min.time.before.relogin": RELOGIN_MS}
    config = kerberized_config(write_config, topic, secure_hdfs, secure_metastore, etl_keytab, root, gssapi)
    # The same job on the broker's PLAINTEXT listener, for this process's reads: it runs the wheel.
    state_config = kerberized_config(write_config, topic, secure_hdfs, secure_metastore, etl_keytab, root,
                                     {"bootstrap.servers": gssapi_broker.bootstrap})

    loop = EtlProcess(config, "run", "--loop", "--interval", "1", "--max-batches", "2", env=etl_env(kdc, tmp_path),
                      venv=gssapi_venv())
    try:
        deadline = time.monotonic() + 300
        while job_state(state_config).committed != {(topic, 0): 50, (topic, 1): 50}:
            assert loop.popen.poll() is None, f"etl run --loop ended early:\n{loop.describe()}"
            assert time.monotonic() < deadline, "the first batch was not committed within 300 s"
            time.sleep(1)
        expired_at = time.time() + TICKET_LIFE_SECONDS
        # Past the ETL principal's ticket lifetime and the NameNode's auth cookie: the next
        # batch needs a new ticket, which only the keytab can give. Its records land at once:
        # one partition's, in one record batch (a long linger), so that the loop, which plans
        # every second, cannot make its last batch of part of them (with both partitions' records,
        # one CI run's second batch took partition 1's and the loop ended without partition 0's).
        time.sleep(TICKET_LIFE_SECONDS + 5)
        kafka.produce(topic, {0: events_by_partition(1, 25, first_id=100)[0]}, bootstrap=gssapi_broker.bootstrap,
                      client={"linger.ms": "2000"})
        code = loop.wait(300)
    finally:
        loop.reap()
    assert code == 0, loop.describe()
    # Its second batch reached the broker on a ticket got from the keytab after the first ones expired.
    assert max(kdc.authtimes(ETL_PRINCIPAL, gssapi_broker.service_principal)) > expired_at, kdc.log_text()

    local = copy_to_local(secure_hdfs.filesystem_as(ETL_PRINCIPAL, etl_keytab), root, tmp_path / "copy")
    report = check_exactly_once(read_back(kdc, secure_hdfs, secure_metastore, monkeypatch, tmp_path), state_config,
                                expected_offsets(topic, {0: 75, 1: 50}), local, run_verify=False)
    assert report.rows == 125


def test_a_keytab_without_the_principal_exits_2_naming_the_key_and_writes_nothing(
        kdc, secure_hdfs, secure_metastore, new_topic, produce, write_config, tmp_path):
    topic = new_topic(partitions=1)
    produce(topic, events_by_partition(1, 5))
    root = secure_hdfs.hdfs.scratch("warehouse")
    # The services' keytab: a real keytab, but without etl@ETL.TEST's key.
    config = kerberized_config(write_config, topic, secure_hdfs, secure_metastore, secure_hdfs.keytab, root)

    result = run_etl(config, env=etl_env(kdc, tmp_path))
    assert result.returncode == 2, result.describe()
    assert f"[warehouse] kerberos_keytab: {secure_hdfs.keytab} holds no key of kerberos_principal {ETL_PRINCIPAL}" \
        in result.stderr
    assert job_state(config).committed == {}
