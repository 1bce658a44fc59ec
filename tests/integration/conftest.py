"""Fixtures against the REAL local services started by scripts/local-stack (no mocks): thin
pytest glue over tests/harness, which holds the code (and is importable without pytest).

ZooKeeper, the Apache Kafka broker, the Hive metastore and the Spark Thrift Server (the
analysts' JDBC endpoint on that metastore) are shared by all tests; every test gets its own
ZooKeeper root, topics and Hive table name, so tests never see each other's state. Ports
follow the script: ETL_ZK_PORT, ETL_KAFKA_PORT, ETL_METASTORE_PORT, ETL_THRIFT_PORT.
"""
from __future__ import annotations

import functools
import itertools
import os
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from etl.config import RetryConfig, ZooKeeperConfig
from etl.state.store import ZkStateStore
from tests.harness import kafka, lifetimes
from tests.harness.config_file import JobTuning, write_config as write_ini_config
from tests.harness.etl_process import settled_reapers
from tests.harness.kdc import Kdc, missing_tools
from tests.harness.kerberized import KerberizedHdfs, KerberizedMetastore
from tests.harness.names import sanitize
from tests.harness.schema_registry import RegistryProcess, registry_for_tests, why_no_stoppable_registry
from tests.harness.spark import tests_session
from tests.harness.stack import Stack, StackDown, ensure_up

# What the tests' configs have always said (scripts/soak.py and the bench pass their own).
TEST_TUNING = JobTuning(session_timeout_seconds=10, max_rejected_ratio=0.5)

# Spark executors must run this interpreter (the venv's), or they miss the project's packages.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


@pytest.fixture(scope="session")
def stack() -> Stack:
    try:
        return ensure_up(Stack.from_environment())
    except StackDown as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(autouse=True)
def no_orphan_outlives_a_clean_run():
    """A clean run's leftovers (its JVM finishing its exit) are reaped while the test goes on
    (tests.harness.etl_process.run_etl); after the test, none may have had to be killed."""
    yield
    orphans = settled_reapers()
    assert not orphans, f"processes outlived their run, which had exited 0, by 10 s and were SIGKILLed: {orphans}"


@pytest.fixture(scope="session", autouse=True)
def jvm_class_archive(stack, zk, tmp_path_factory):
    """The driver JVM's class archive (etl.hive.class_archive) exists before the first test, so
    that every `etl` command of the suite maps it, and no test pays for recording it, or says so
    in its output, by chance of order. One real `etl run` of a throwaway job records it when the
    user's cache has none for this venv, and maps it otherwise. Its driver settings are the
    write_config fixture's, which are part of the archive's name. tests/integration/
    test_class_archive_runs.py checks recording and mapping themselves, in a folder of its own."""
    from tests.harness.data import events_by_partition
    from tests.harness.etl_process import run_etl
    work = tmp_path_factory.mktemp("jvm-class-archive")
    admin = AdminClient({"bootstrap.servers": stack.kafka_bootstrap})
    topic, root = f"etl-jvm-archive-{uuid.uuid4().hex[:8]}", f"/etl-tests/jvm-archive-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(admin, topic, 1)
    kafka.produce(topic, events_by_partition(1, 10), bootstrap=stack.kafka_bootstrap)
    config = write_ini_config(work / "etl.ini", stack, job_name="jvm-class-archive", zk_root=root,
                              warehouse_dir=work / "warehouse", table=f"t_{uuid.uuid4().hex[:8]}",
                              tuning=TEST_TUNING, kafka={"topics": topic})
    done = run_etl(config)
    kafka.delete_topics(admin, [topic])
    zk.delete(root, recursive=True)
    assert done.returncode == 0, done.describe()


@pytest.fixture(scope="session")
def thrift_url(stack) -> str:
    """The JDBC URL of the analysts' endpoint, the Spark Thrift Server (HiveServer2 protocol):
    jdbc:hive2://127.0.0.1:$ETL_THRIFT_PORT/default. Query it with scripts/beeline, or with
    the Hive JDBC driver through the `spark` fixture's JVM (see test_analysts_endpoint.py)."""
    return stack.thrift_url


@pytest.fixture(scope="session")
def spark(stack):
    """The session's one SparkSession, with Hive support through the shared metastore."""
    session = tests_session(stack)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def zk(stack):
    """A connected kazoo client, shared by the session (for setup, checks and cleanup)."""
    client = KazooClient(hosts=stack.zk_hosts, timeout=10)
    client.start(timeout=15)
    yield client
    client.stop()
    client.close()


@pytest.fixture
def zk_root(request, zk) -> str:
    """A fresh, not yet existing znode path for the test's `[zookeeper] root`; removed after."""
    path = f"/etl-tests/{sanitize(request.node.name, 'A-Za-z0-9_-', 100)}-{uuid.uuid4().hex[:8]}"
    yield path
    try:
        zk.delete(path, recursive=True)
    except NoNodeError:
        pass


@pytest.fixture
def open_store(stack, zk_root):
    """A factory of connected ZkStateStores for job "job" on the test's root, with short
    retries and a 4 s session; all are closed after the test."""
    stores = []

    def make():
        store = ZkStateStore(ZooKeeperConfig(hosts=stack.zk_hosts, root=zk_root, session_timeout_seconds=4),
                             "job", RetryConfig(attempts=2, initial_wait_seconds=0.1, max_wait_seconds=0.2))
        store.connect()
        stores.append(store)
        return store
    yield make
    for store in stores:
        store.close()


@pytest.fixture(scope="session")
def kafka_admin(stack) -> AdminClient:
    return AdminClient({"bootstrap.servers": stack.kafka_bootstrap})


@pytest.fixture
def new_topic(request, kafka_admin):
    """Factory: new_topic(partitions=4, name=None, config=None) -> the name of a new, ready topic
    (`config`: topic-level settings, e.g. {"cleanup.policy": "compact"}).

    Names are unique and include the test's name; all topics created are deleted after the
    test (already deleted by the test, or broker gone: nothing to clean). A test grows a live
    topic with tests.harness.kafka.add_partitions.
    """
    created: list[str] = []
    base = sanitize(request.node.name, "A-Za-z0-9._-", 150)

    def create(partitions: int = 4, name: str | None = None, config: dict | None = None) -> str:
        name = name or f"{base}-{uuid.uuid4().hex[:8]}"
        created.append(kafka.create_topic(kafka_admin, name, partitions, config=config))
        return name

    yield create
    kafka.delete_topics(kafka_admin, created)


@pytest.fixture
def produce(stack):
    """produce(topic, values_by_partition, keys_by_partition=None) -> [(partition, offset)].

    See tests.harness.kafka.produce: the high watermark afterwards equals the real end.
    """
    return functools.partial(kafka.produce, bootstrap=stack.kafka_bootstrap)


@pytest.fixture
def watermarks(stack):
    """watermarks(topic) -> {partition: (low, high)}."""
    return functools.partial(kafka.watermarks, bootstrap=stack.kafka_bootstrap)


@pytest.fixture
def hive_table_name() -> str:
    return f"t_{uuid.uuid4().hex[:8]}"


@pytest.fixture
def warehouse_dir(tmp_path) -> Path:
    """The test's warehouse root (not created: the ETL creates what it needs)."""
    return tmp_path / "warehouse"


@pytest.fixture
def write_config(request, tmp_path, stack, zk_root, warehouse_dir, hive_table_name):
    """Factory: write_config(**sections) -> Path of an INI file for the ETL.

    Each keyword is a section: a dict whose values override or add keys (None removes the
    key), or None to drop the whole section. `kafka={"topics": ...}` or
    `kafka={"topics_regex": ...}` is required.
    Example: write_config(job={"max_records_per_partition": "10"}, kafka={"topics": "a,b"}).
    """
    counter = itertools.count(1)
    job_name = sanitize(request.node.name, "A-Za-z0-9_.-", 100)

    def write(**sections) -> Path:
        if not {"topics", "topics_regex"} & set(sections.get("kafka") or {}):
            raise TypeError("write_config: pass kafka={'topics': ...} or kafka={'topics_regex': ...} (None to leave "
                            "the key out)")
        n = next(counter)
        return write_ini_config(tmp_path / ("etl.ini" if n == 1 else f"etl-{n}.ini"), stack, job_name=job_name,
                                zk_root=zk_root, warehouse_dir=warehouse_dir, table=hive_table_name,
                                tuning=TEST_TUNING, **sections)

    return write


@pytest.fixture
def schema_registry(tmp_path):
    """A Schema Registry at `.url` that the job's executors reach over TCP: a fresh test server
    in this process, or the real registry $ETL_TEST_SCHEMA_REGISTRY_URL names (shared: keep to
    subjects of the test's own topics). Counting fetches or stopping it takes `registry_process`."""
    with registry_for_tests(tmp_path / "schema-registry") as registry:
        yield registry


@pytest.fixture
def registry_process(tmp_path):
    """The test server in its own process, which the test may stop(), kill() and start() again
    on the same port and data (mid-batch, say); skipped when the tests use a real registry."""
    reason = why_no_stoppable_registry()
    if reason:
        pytest.skip(reason)
    with RegistryProcess(tmp_path / "schema-registry-process") as registry:
        yield registry


@pytest.fixture(scope="session")
def hdfs(tmp_path_factory):
    """The shared HDFS (tests.harness.hdfs.Hdfs): a NameNode and a DataNode of Hadoop's jars,
    started once per session by `scripts/local-stack up hdfs`, only when a test asks for it;
    with ETL_TEST_HDFS=private, a private pair of the same settings, for this session only.
    Keep to folders of the test's own (Hdfs.job_folder); faults beyond them take a PrivateHdfs."""
    from tests.harness.hdfs import PrivateHdfs, shared_hdfs
    if os.environ.get("ETL_TEST_HDFS") == "private":
        with PrivateHdfs(tmp_path_factory.mktemp("session-hdfs")) as cluster:
            yield cluster.hdfs
        return
    try:
        yield shared_hdfs()
    except StackDown as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def packed_env() -> Path:
    """scripts/pack-env's archive (tests.harness.cluster_submit), built once per session."""
    from tests.harness.cluster_submit import pack_env
    return pack_env()


@pytest.fixture(scope="session")
def edge_node_python(packed_env, tmp_path_factory) -> Path:
    """The archive unpacked, as on an edge node: the client-mode driver's python."""
    from tests.harness.cluster_submit import unpack
    return unpack(packed_env, tmp_path_factory.mktemp("edge-node"))


@pytest.fixture(scope="session")
def spark_standalone(tmp_path_factory):
    """A Spark standalone cluster of the session's own (tests.harness.spark_standalone): a Master
    and two 1-core Workers, started once per session when a test first asks for it."""
    from tests.harness.spark_standalone import SparkStandalone
    cluster = SparkStandalone(tmp_path_factory.mktemp("spark-standalone"))
    with lifetimes.held("spark_standalone") as stops:
        stops.callback(cluster.stop)
        cluster.start()
        yield cluster


@pytest.fixture(scope="session")
def yarn(tmp_path_factory):
    """A YARN of the session's own (tests.harness.yarn.PrivateYarn: a ResourceManager and a
    NodeManager over a private HDFS pair), started once per session when a test first asks for it
    (test_yarn.py, test_airflow_dag.py)."""
    from tests.harness.yarn import PrivateYarn
    cluster = PrivateYarn(tmp_path_factory.mktemp("yarn"))
    with lifetimes.held("yarn") as stops:
        started = time.monotonic()
        stops.callback(cluster.stop)
        cluster.start()
        print(f"[yarn] ResourceManager and NodeManager over a private HDFS up in {time.monotonic() - started:.0f}s")
        yield cluster


@pytest.fixture(scope="session")
def yarn_archive(yarn, packed_env) -> str:
    """The packed environment put once on the YARN's HDFS, readable by all, as docs/cluster.md
    says to ship it: spark-submit then uploads nothing, and the NodeManager localizes it once
    into its public cache for every application, where a local path is uploaded and unpacked
    again for each (about 20 s an application here)."""
    return yarn.hdfs.put_public(packed_env)


# The Kerberos tests' KDC and the services it secures (test_kerberos.py, test_kerberos_yarn.py):
# here, so that a session that runs both files starts them once.
@pytest.fixture(scope="session")
def kdc(tmp_path_factory):
    missing = missing_tools()
    if missing:
        pytest.fail(f"MIT Kerberos tools missing: {missing}; run scripts/setup --tests", pytrace=False)
    # The harness points this process's own Kerberos clients at the KDC (os.environ: gssapi
    # reads it at each call); the session's later tests get the environment back as it was.
    saved = {key: os.environ.get(key) for key in ("KRB5_CONFIG", "KRB5_KDC_PROFILE", "KRB5CCNAME")}
    with lifetimes.held("kdc") as stops:
        stops.callback(_restore_environment, saved)
        yield stops.enter_context(Kdc(tmp_path_factory.mktemp("kdc")))


def _restore_environment(saved: dict[str, str | None]) -> None:
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="session")
def secure_hdfs(kdc, tmp_path_factory):
    with lifetimes.held("secure_hdfs") as stops:
        yield stops.enter_context(KerberizedHdfs(tmp_path_factory.mktemp("secure-hdfs"), kdc))


@pytest.fixture(scope="session")
def secure_metastore(kdc, secure_hdfs, tmp_path_factory):
    with lifetimes.held("secure_metastore") as stops:
        yield stops.enter_context(KerberizedMetastore(tmp_path_factory.mktemp("secure-metastore"), kdc, secure_hdfs))
