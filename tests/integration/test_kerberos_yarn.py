"""Kerberos on YARN for real (issue 28): `spark-submit --master yarn --deploy-mode cluster
--principal --keytab` of the packed environment (scripts/pack-env) on a kerberized YARN
(tests/harness/kerberized_yarn.py) over the kerberized HDFS and metastore of
tests/harness/kerberized.py, the tests' own KDC (tests/harness/kdc.py).

Two kinds of credentials reach the job. Spark's: the client logs in from --keytab, obtains HDFS
delegation tokens (renewer: the ResourceManager) for its staging folder on hdfs://, and the AM
(the driver, in cluster mode) gets the keytab through the staging folder to renew them. The
ETL's own: its warehouse client is WebHDFS with SPNEGO, which Hadoop's delegation tokens do not
cover, so the driver and every executor's Python tasks log in from [warehouse] kerberos_keytab,
an absolute path that holds on every node (here the one machine is every node). Kafka: none,
the confluent-kafka wheel's librdkafka has no GSSAPI (docs/cluster.md).

The KDC, HDFS, metastore and YARN start once per session and only when these tests run.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.harness.cluster_submit import SPARK_HOME
from tests.harness.data import events_by_partition
from tests.harness.hdfs import copy_to_local
from tests.harness.kdc import REALM
from tests.harness.kerberized_yarn import KerberizedYarn
from tests.harness.oracle import check_exactly_once, expected_offsets
from tests.harness.paths import REPO
from tests.harness.state import job_state
from tests.integration.test_kerberos import kerberized_config, read_back

pytestmark = [pytest.mark.kerberos, pytest.mark.slow, pytest.mark.cell("yarn-kerberos")]

ETL_PRINCIPAL = f"etl@{REALM}"
ARCHIVE = REPO / "build" / "kafka-hive-etl-env-kerberos.tar.gz"


@pytest.fixture(scope="session")
def kerberos_env() -> Path:
    """scripts/pack-env's archive with the kerberos extra (requests-kerberos, for the WebHDFS
    client's SPNEGO in the driver and the executors), built once; a later session reuses it."""
    result = subprocess.run([sys.executable, str(REPO / "scripts" / "pack_env.py"), "--extras", "kerberos",
                             "--output", str(ARCHIVE)], capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout + result.stderr[-5000:]
    return ARCHIVE


@pytest.fixture(scope="session")
def secure_yarn(kdc, secure_hdfs, tmp_path_factory):
    with KerberizedYarn(tmp_path_factory.mktemp("secure-yarn"), kdc, secure_hdfs) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def yarn_etl_keytab(kdc):
    """etl@ETL.TEST's keytab (the KDC of this module's session; tickets of the realm's hour)."""
    return kdc.add_principal(ETL_PRINCIPAL, kdc.keytabs / "ETL.keytab")


def submit(yarn: KerberizedYarn, kdc, archive: Path, config: Path, cwd: Path, *credentials: str,
           timeout: float = 300) -> subprocess.CompletedProcess:
    """spark-submit in cluster mode: the driver in the AM's container, the archive's python in
    every container. The client and every container get the KDC's krb5.conf and a ticket cache
    that does not exist, so that only a keytab can log anyone in. Spark's own INFO log stays on
    in the containers (its token lines are what the test reads)."""
    no_ticket = f"FILE:{cwd / 'no-such-ccache'}"
    krb5 = f"-Djava.security.krb5.conf={kdc.krb5_conf}"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PYSPARK_") and k not in ("PYTHONPATH", "VIRTUAL_ENV", "SPARK_HOME")}
    env.update(kdc.env, SPARK_HOME=str(SPARK_HOME), HADOOP_CONF_DIR=str(yarn.client_conf), KRB5CCNAME=no_ticket,
               SPARK_SUBMIT_OPTS=krb5, SPARK_LOCAL_IP="127.0.0.1")
    python = "./environment/bin/python"
    conf = {
        "spark.pyspark.python": python,
        # Spark's jars are on every node already (the same machine): no 400 MB upload per run.
        "spark.yarn.jars": f"local:{SPARK_HOME}/jars/*",
        "spark.driver.memory": "512m", "spark.executor.memory": "512m",
        "spark.executor.instances": "1", "spark.executor.cores": "1",
        "spark.driver.extraJavaOptions": krb5, "spark.executor.extraJavaOptions": krb5,
        # A client the RM refuses gives up after 5 s, not after YARN's 15 minutes of retries.
        "spark.hadoop.yarn.resourcemanager.connect.max-wait.ms": "5000",
        "spark.hadoop.yarn.resourcemanager.connect.retry-interval.ms": "1000",
    }
    for where in ("spark.yarn.appMasterEnv", "spark.executorEnv"):
        conf.update({f"{where}.{key}": value for key, value in kdc.env.items()})
        conf[f"{where}.KRB5CCNAME"] = no_ticket
        conf[f"{where}.SPARK_LOCAL_IP"] = "127.0.0.1"
    command = [str(SPARK_HOME / "bin" / "spark-submit"), "--master", "yarn", "--deploy-mode", "cluster",
               *credentials, "--archives", f"{archive}#environment", "--files", str(config),
               *(arg for key, value in conf.items() for arg in ("--conf", f"{key}={value}")),
               str(REPO / "scripts" / "run_etl.py"), "--config", config.name]
    return subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          start_new_session=True)


def application_id(output: str) -> str:
    found = re.search(r"Submitted application (application_\d+_\d+)", output)
    assert found, output[-6000:]
    return found.group(1)


def test_spark_submit_to_kerberized_yarn_with_a_keytab_loads_exactly_once_through_kerberized_hdfs(
        kdc, secure_hdfs, secure_metastore, secure_yarn, yarn_etl_keytab, kerberos_env, new_topic, produce,
        write_config, tmp_path, monkeypatch):
    topic = new_topic(partitions=2)
    produce(topic, events_by_partition(2, 100))
    root = secure_hdfs.hdfs.scratch("warehouse")
    config = kerberized_config(write_config, topic, secure_hdfs, secure_metastore, yarn_etl_keytab, root)
    cwd = tmp_path / "submit"
    cwd.mkdir()

    # Without --principal/--keytab and without a ticket, the client cannot reach the RM at all.
    started = time.monotonic()
    refused = submit(secure_yarn, kdc, kerberos_env, config, cwd, timeout=90)
    refused_seconds = time.monotonic() - started
    assert refused.returncode != 0, refused.stderr[-4000:]
    assert "Client cannot authenticate via:[TOKEN, KERBEROS]" in refused.stderr, refused.stderr[-4000:]
    assert job_state(config).committed == {}

    started = time.monotonic()
    result = submit(secure_yarn, kdc, kerberos_env, config, cwd, "--principal", ETL_PRINCIPAL,
                    "--keytab", str(yarn_etl_keytab))
    seconds = time.monotonic() - started
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-8000:]
    app = application_id(output)
    assert "final status: SUCCEEDED" in output, output[-6000:]
    # Spark's client logged in from the keytab and got an HDFS delegation token renewed by the RM.
    token = "Created token for etl: HDFS_DELEGATION_TOKEN owner=etl@ETL.TEST, renewer=rm,"
    assert token in output, output[-8000:]

    # The containers: the AM (the driver) and an executor that ran the tasks, on the NodeManager.
    containers = sorted((secure_yarn.container_logs / app).iterdir())
    assert len(containers) >= 2, containers
    am_log = (containers[0] / "stderr").read_text(errors="replace")
    executor_logs = [(c / "stderr").read_text(errors="replace") for c in containers[1:]]
    am_stdout = (containers[0] / "stdout").read_text(errors="replace")
    assert "batch 1 (new) COMMITTED: 2 files, 200 rows, 0 rejected" in am_stdout, am_stdout[-4000:]
    # The AM logged in from the keytab the client shipped, and got tokens of its own to renew.
    assert f"Login successful for user {ETL_PRINCIPAL} using keytab file" in am_log, am_log[-6000:]
    assert token in am_log and "HadoopDelegationTokenManager: Scheduling renewal" in am_log, am_log[-6000:]
    assert any("Running task" in text and "CoarseGrainedExecutorBackend" in text
               and "Updating delegation tokens for current user" in text for text in executor_logs), executor_logs
    print(f"[kerberos-yarn] refused without a keytab in {refused_seconds:.0f}s; {app}: {len(containers)} "
          f"containers, spark-submit {seconds:.0f}s")

    local = copy_to_local(secure_hdfs.filesystem_as(ETL_PRINCIPAL, yarn_etl_keytab), root, tmp_path / "copy")
    report = check_exactly_once(read_back(kdc, secure_hdfs, secure_metastore, monkeypatch, tmp_path), config,
                                expected_offsets(topic, {0: 100, 1: 100}), local, run_verify=False)
    assert report.rows == 200
