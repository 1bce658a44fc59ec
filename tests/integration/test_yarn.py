"""The job on a real YARN: Hadoop 3.5.0's ResourceManager and a NodeManager (tests/harness/yarn.py)
over a private HDFS pair, the warehouse on that HDFS through WebHDFS, `spark-submit --master yarn`
with the packed environment of scripts/pack-env put once on that HDFS, readable by all
(`--archives hdfs://.../ENV#environment`, the `yarn_archive` fixture), as docs/cluster.md says.
The cluster (the `yarn` fixture of conftest.py) starts once per session, and only when a test
that needs it runs.

No test can pass on a job that ran in local mode by mistake: each finds its application in the
ResourceManager (application_...), and the probe (tests/harness/cluster_submit.py) shows every
executor's Python running in a YARN container's working folder of that application, with `etl`
imported from the archive unpacked there.

Spark's jars reach the containers as `spark.yarn.jars=local:$SPARK_HOME/jars/*`: the NodeManager
runs on this machine, where pyspark's jars are, so nothing is uploaded per submission (a cluster
would point spark.yarn.archive at one copy on HDFS instead).

ETL_YARN_EXIT_CODES=all runs every exit code of the job in cluster mode (0, 1, 2, 75, 99); by
default 2 (a config error: the job's code in YARN's diagnostics), and a lock-held skip with the
default code 0, which must end SUCCEEDED (a scheduler must see a skip as one).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from etl.config import load_config
from etl.state.store import ZkStateStore
from tests.harness.cluster_submit import SPARK_HOME, probe_dir, read_probes, spark_submit
from tests.harness.data import events_by_partition
from tests.harness import kafka
from tests.harness.kills import CLEANUP, fault_point_landed, sigkill
from tests.harness.oracle import expected_offsets, table_offsets
from tests.harness.paths import EVENTS_SCHEMA
from tests.harness.secure_kafka import SecureBroker
from tests.harness.state import job_state
from tests.harness.yarn import YARN_CLI, PrivateYarn, container_pids, kill_container

pytestmark = [pytest.mark.slow, pytest.mark.cell("yarn")]

DB = "etl_test"
ALL_EXIT_CODES = os.environ.get("ETL_YARN_EXIT_CODES", "") == "all"
# Small containers for a 2-core machine: two executors of 512m (+384m overhead) and 1 core each.
SMALL = ("spark.yarn.jars=local:" + str(SPARK_HOME / "jars" / "*"), "spark.executor.instances=2",
         "spark.executor.cores=1", "spark.executor.memory=512m", "spark.driver.memory=512m",
         "spark.yarn.am.memory=256m",
         "spark.executor.extraJavaOptions=-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
         "spark.yarn.am.extraJavaOptions=-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")


FINAL_STATES = ("FINISHED", "FAILED", "KILLED")


def settled(yarn: PrivateYarn, app_id: str, timeout: float = 60.0) -> dict:
    """The application's report once YARN has settled it. spark-submit in client mode returns when
    its driver ends, and the ApplicationMaster unregisters a moment later: one CI run read
    RUNNING/UNDEFINED right after spark-submit had returned 0."""
    deadline = time.monotonic() + timeout
    app = yarn.app(app_id)
    while app["state"] not in FINAL_STATES and time.monotonic() < deadline:
        time.sleep(0.5)
        app = yarn.app(app_id)
    return app


class Submission:
    """One spark-submit --master yarn of scripts/run_etl.py, and what YARN says of it."""

    def __init__(self, yarn: PrivateYarn, result: subprocess.CompletedProcess, tag: str, seconds: float):
        self.yarn, self.result, self.seconds = yarn, result, seconds
        [app] = [a for a in yarn.apps() if tag in a.get("applicationTags", "").split(",")]
        self.app_id: str = app["id"]
        self.app = settled(yarn, self.app_id)

    @property
    def output(self) -> str:
        return self.result.stdout + self.result.stderr[-6000:]

    def container_dirs(self) -> Path:
        """The application's folder of containers' working folders on the NodeManager."""
        [appcache] = self.yarn.nm_dir.glob(f"local/usercache/*/appcache/{self.app_id}")
        return appcache

    def aggregated_log(self, log_file: str = "stdout", timeout: float = 60) -> str:
        """`yarn logs -applicationId APP -log_files FILE`, once the NodeManager has aggregated them to HDFS."""
        deadline = time.monotonic() + timeout
        while True:
            done = self.yarn.cli("logs", "-applicationId", self.app_id, "-log_files", log_file)
            if done.returncode == 0 and "LogType:" + log_file in done.stdout:
                return done.stdout
            if time.monotonic() > deadline:
                raise AssertionError(f"yarn logs failed ({done.returncode}):\n{done.stdout}\n{done.stderr[-3000:]}")
            time.sleep(2)


def submit(yarn: PrivateYarn, mode: str, config: Path, archive: str, probes: Path, *conf: str,
           driver_python: Path | None = None, files: tuple[Path, ...] = (), args: tuple[str, ...] = (),
           cwd: Path, timeout: float = 600, wait_for=None) -> Submission:
    """spark-submit --master yarn --deploy-mode MODE, as docs/cluster.md shows. Client mode: the
    driver runs `driver_python` here. Cluster mode: the driver runs in the ApplicationMaster's
    container with the archive's python, and reads the INI (and what it names) from `files`.
    `wait_for`, if given, is called with the running process (to kill a container mid-batch)."""
    tag = uuid.uuid4().hex[:12]
    settings = [*SMALL, f"spark.yarn.tags={tag}", *conf]
    if not any(s.startswith("spark.yarn.maxAppAttempts=") for s in conf):
        settings.append("spark.yarn.maxAppAttempts=1")
    line = spark_submit("yarn", config, archive=archive, driver_python=driver_python, deploy_mode=mode,
                        probes=probes, conf=settings, files=files, args=args, hadoop_conf_dir=yarn.conf_dir)
    started = time.monotonic()
    proc = subprocess.Popen(line.command, env=line.env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        if wait_for is not None:
            wait_for(proc)
        stdout, stderr = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            sigkill(proc.pid, "spark-submit", group=True, purpose=CLEANUP)
            proc.wait()
    result = subprocess.CompletedProcess(line.command, proc.returncode, stdout, stderr)
    return Submission(yarn, result, tag, time.monotonic() - started)


@pytest.fixture
def probes(tmp_path) -> Path:
    return probe_dir(tmp_path)


@pytest.fixture
def submit_dir(tmp_path) -> Path:
    folder = tmp_path / "submit"
    folder.mkdir()
    return folder


@pytest.fixture
def yarn_config(yarn, write_config, tmp_path):
    """Factory: the INI of a job over `topic`, its warehouse on the YARN's HDFS; the DDL sits next
    to it and is named by its bare name, so the INI reads the same here and, after --files, in
    the ApplicationMaster's working folder."""
    shutil.copy(EVENTS_SCHEMA, tmp_path / EVENTS_SCHEMA.name)

    def make(topic: str, **sections) -> Path:
        root = yarn.hdfs.job_folder("yarn")
        return write_config(kafka={"topics": topic, **sections.pop("kafka", {})},
                            warehouse=yarn.hdfs.warehouse(root), hive={"schema": EVENTS_SCHEMA.name}, **sections)
    return make


def executors_in_containers(submission: Submission, probes: Path) -> list[dict]:
    """The probes of the executors' Python processes: every one ran ./environment/bin/python in a
    container's working folder of this application and imported etl from that archive."""
    containers = submission.container_dirs()
    executors = [p for p in read_probes(probes) if p["cwd"].startswith(f"{containers}/container_")]
    assert executors, (containers, read_probes(probes))
    for probe in executors:
        environment = Path(probe["cwd"]) / "environment"
        assert probe["executable"] == f"{environment}/bin/python", probe
        assert re.fullmatch(rf"{environment}/lib/python3\.\d+/site-packages/etl/__init__\.py", probe["etl"]), probe
    return executors


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory):
    with SecureBroker(tmp_path_factory.mktemp("secure-kafka")) as broker:
        yield broker


@pytest.mark.cell("kafka-scram")
def test_cluster_mode_runs_the_driver_in_the_application_master_over_sasl_ssl_exactly_once(
        yarn, yarn_archive, probes, submit_dir, spark, secure_broker, yarn_config, hive_table_name, tmp_path):
    """Kafka behind SASL_SSL (SCRAM-SHA-512) on YARN, with the files shipped as docs/cluster.md
    says for cluster mode: the CA and the password file next to the INI, named by their bare
    names, and sent with it by --files. The driver in the ApplicationMaster's container and the
    executors in theirs each find them in their own working folder."""
    topic = secure_broker.create_topic(f"yarn-scram-{uuid.uuid4().hex[:8]}", 4)
    counts = {p: 100 for p in range(4)}
    client = secure_broker.client("SCRAM")
    kafka.produce(topic, events_by_partition(4, 100), bootstrap=client.pop("bootstrap.servers"), client=client)
    kafka_keys = secure_broker.etl_settings("SCRAM", tmp_path)
    shipped = {key: Path(kafka_keys[key]) for key in ("ssl.ca.location", "sasl.password_file")}
    for key, path in shipped.items():
        if path.parent != tmp_path:
            shutil.copy(path, tmp_path / path.name)
        kafka_keys[key] = path.name  # bare: the driver's and each executor's working folder
    config = yarn_config(topic, kafka=kafka_keys)

    done = submit(yarn, "cluster", config, yarn_archive, probes, cwd=submit_dir,
                  files=(config.parent / EVENTS_SCHEMA.name, *(tmp_path / path.name for path in shipped.values())))

    assert done.result.returncode == 0, done.output
    assert (done.app["state"], done.app["finalStatus"]) == ("FINISHED", "SUCCEEDED"), done.app
    assert f"Application report for {done.app_id} (state: FINISHED)" in done.result.stderr, done.output
    am_container = f"{done.container_dirs()}/{done.app_id.replace('application', 'container')}_01_000001"
    [driver] = [p for p in read_probes(probes) if p["cwd"] == am_container]  # the driver: in the AM's container
    assert driver["executable"] == f"{am_container}/environment/bin/python", driver
    executors = [p for p in executors_in_containers(done, probes) if p["cwd"] != am_container]
    assert executors
    assert table_offsets(spark, DB, hive_table_name) == expected_offsets(topic, counts)
    # The driver's output is the AM container's stdout, which `yarn logs` reads from HDFS.
    logs = done.aggregated_log("stdout")
    assert "batch 1 (new) COMMITTED: 4 files, 400 rows, 0 rejected" in logs, logs[-3000:]
    print(f"[yarn] cluster mode over SASL_SSL (SCRAM-SHA-512): {done.app_id}, {done.seconds:.0f}s")


def wait_for_probe(probes: Path, predicate, proc: subprocess.Popen, timeout: float = 300) -> dict:
    """The first probe that `predicate` accepts, while spark-submit is still running."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [p for p in read_probes(probes) if predicate(p)]
        if found:
            return found[0]
        assert proc.poll() is None, "spark-submit ended before the probe showed up"
        time.sleep(0.5)
    raise AssertionError(f"no such probe after {timeout}s: {read_probes(probes)}")


def test_client_mode_runs_the_executors_in_yarn_containers_and_one_killed_mid_batch_is_replaced_exactly_once(
        yarn, yarn_archive, edge_node_python, probes, submit_dir, spark, new_topic, produce, yarn_config,
        hive_table_name):
    """Client mode: the driver on the edge node's python, the executors' Python in YARN
    containers of the application. The task of partition 0 pauses after its first chunk (a
    test-only fault point, in the executors' environment only); the test SIGKILLs every process
    of that executor's container, and YARN's replacement reruns the task."""
    topic = new_topic(partitions=4)
    counts = {p: 250 for p in range(4)}
    produce(topic, events_by_partition(4, 250))
    config = yarn_config(topic)
    killed: list[str] = []

    def kill_the_paused_executor(proc: subprocess.Popen) -> None:
        deadline = time.monotonic() + 300
        while not killed:
            for pid in paused_workers():
                container = _environ(pid).get("CONTAINER_ID")
                if container:
                    assert kill_container(container, "YARN executor container"), container
                    killed.append(container)
                    break
            assert proc.poll() is None and time.monotonic() < deadline, "no executor paused at writing:0"
            time.sleep(0.3)

    done = submit(yarn, "client", config, yarn_archive, probes, "spark.executorEnv.ETL_FAULT_POINT=writing:0",
                  "spark.executorEnv.ETL_FAULT_ACTION=sleep:15", driver_python=edge_node_python, cwd=submit_dir,
                  wait_for=kill_the_paused_executor)

    assert done.result.returncode == 0, done.output
    assert "batch 1 (new) COMMITTED: 4 files, 1000 rows, 0 rejected" in done.result.stdout, done.output
    assert re.fullmatch(r"application_\d+_\d+", done.app_id)
    assert (done.app["state"], done.app["finalStatus"]) == ("FINISHED", "SUCCEEDED"), done.app
    drivers = [p for p in read_probes(probes) if p["executable"] == str(edge_node_python)]
    assert drivers, read_probes(probes)
    executors = executors_in_containers(done, probes)
    assert len({p["cwd"] for p in executors}) >= 2, executors  # Python tasks in more than one container
    # The archive came from HDFS into the NodeManager's public cache, one copy for every application.
    name = Path(yarn_archive).name
    assert len(list(yarn.nm_dir.glob(f"local/filecache/*/{name}"))) == 1, yarn_archive
    assert not list(yarn.nm_dir.glob(f"local/usercache/*/filecache/*/{name}")), yarn_archive
    [container] = killed
    assert container.startswith(done.app_id.replace("application", "container")), (container, done.app_id)
    assert not container_pids(container)
    # The driver heard of it from YARN: the executor lost, its container named.
    assert f"Container from a bad node: {container} on host: localhost. Exit status: 137" in done.result.stderr, \
        done.output
    assert table_offsets(spark, DB, hive_table_name) == expected_offsets(topic, counts)
    print(f"[yarn] client mode: {done.app_id}, executors in {sorted(Path(p['cwd']).name for p in executors)}; "
          f"executor container {container} SIGKILLed mid-batch: {done.seconds:.0f}s, exactly once")


def paused_workers() -> list[int]:
    """Python processes with the writing:0 fault point in their environment (the executors')."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and _environ(int(entry.name)).get("ETL_FAULT_POINT") == "writing:0":
            pids.append(int(entry.name))
    return pids


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    return dict(item.decode(errors="replace").partition("=")[::2] for item in raw.split(b"\0") if b"=" in item)


AM_KILLED = ("spark.yarn.appMasterEnv.ETL_FAULT_POINT=state:PLANNED", "spark.yarn.appMasterEnv.ETL_FAULT_ACTION=kill")
# The killed AM's ZooKeeper session holds the lock until it expires: the server's 4 s minimum,
# not the tests' usual 10 s, so that the next attempt or submission waits less.
SHORT_SESSION = {"zookeeper": {"session_timeout_seconds": "4"}}
# Attempt 2 must come while attempt 1's session still holds the lock. YARN starts it within a few
# seconds on a quiet machine, but took longer than 4 s on a two-worker suite's load (5 to 9).
AM_RESTART_SESSION = {"zookeeper": {"session_timeout_seconds": "20"}}


def test_the_application_master_killed_mid_batch_attempt_2_resumes_the_open_batch_exactly_once(
        yarn, yarn_archive, probes, submit_dir, spark, new_topic, produce, yarn_config, hive_table_name):
    """The driver, in the ApplicationMaster, SIGKILLs its container's processes (the AM's JVM and
    the Python driver) right after it stored the plan. YARN starts attempt 2 within seconds, while
    attempt 1's ZooKeeper session still holds the job's lock: attempt 2 sees that the holder is an
    earlier attempt of its own application, which YARN only replaces once it is dead, waits for
    that session to expire, takes the lock and resumes the open batch."""
    topic = new_topic(partitions=4)
    counts = {p: 100 for p in range(4)}
    produce(topic, events_by_partition(4, 100))
    config = yarn_config(topic, **AM_RESTART_SESSION)
    schema = config.parent / EVENTS_SCHEMA.name

    done = submit(yarn, "cluster", config, yarn_archive, probes, *AM_KILLED, "spark.yarn.maxAppAttempts=2",
                  files=(schema,), cwd=submit_dir)

    attempts = yarn.attempts(done.app_id)
    assert len(attempts) == 2, attempts
    assert done.result.returncode == 0, done.output
    assert (done.app["state"], done.app["finalStatus"]) == ("FINISHED", "SUCCEEDED"), done.app
    logs = done.aggregated_log("stdout")
    attempt_1 = done.app_id.replace("application", "container") + "_01_000001"
    attempt_2 = logs[logs.index(done.app_id.replace("application", "container") + "_02_000001"):]
    attempt_2 = attempt_2.split("End of LogType:stdout")[0]
    assert "an earlier attempt of this YARN application" in attempt_2, attempt_2[-4000:]
    assert "batch 1 (resumed) COMMITTED: 4 files, 400 rows, 0 rejected" in attempt_2, attempt_2[-4000:]
    assert attempt_1 in logs and "COMMITTED" not in logs[logs.index(attempt_1):].split("End of LogType")[0]
    assert table_offsets(spark, DB, hive_table_name) == expected_offsets(topic, counts)
    fault_point_landed("YARN ApplicationMaster")
    print(f"[yarn] AM SIGKILLed at PLANNED, maxAppAttempts=2: {done.app_id}, {done.seconds:.0f}s, attempt 2 "
          f"waited for attempt 1's lock and resumed the batch exactly once")


def test_the_application_master_killed_with_one_attempt_fails_the_application_and_commits_nothing(
        yarn, yarn_archive, probes, submit_dir, spark, new_topic, produce, yarn_config, hive_table_name):
    """With one attempt, YARN fails the application (exit code 137 in its diagnostics) and
    spark-submit exits 1, the batch open and nothing committed. The next submission is a run like
    any other: it resumes the open batch as the test above's attempt 2 and tests/integration/
    test_crash.py's reruns do (a whole second submission here took about 40 s of the suite)."""
    topic = new_topic(partitions=4)
    produce(topic, events_by_partition(4, 100))
    config = yarn_config(topic, **SHORT_SESSION)
    schema = config.parent / EVENTS_SCHEMA.name

    killed = submit(yarn, "cluster", config, yarn_archive, probes, *AM_KILLED, files=(schema,), cwd=submit_dir)
    assert killed.result.returncode == 1, killed.output
    assert (killed.app["state"], killed.app["finalStatus"]) == ("FAILED", "FAILED"), killed.app
    assert len(yarn.attempts(killed.app_id)) == 1
    assert "exitCode: 137" in killed.app["diagnostics"], killed.app["diagnostics"]
    assert table_offsets(spark, DB, hive_table_name) == {}
    state = job_state(config)
    assert (state.last_batch_id, state.last_state, state.committed) == (1, "PLANNED", {}), state
    fault_point_landed("YARN ApplicationMaster")
    print(f"[yarn] AM SIGKILLed, maxAppAttempts=1: spark-submit {killed.result.returncode} after "
          f"{killed.seconds:.0f}s; batch 1 left PLANNED, nothing committed")


# What the job exits with in the ApplicationMaster, and how to provoke it without data.
EXIT_CASES = {
    0: "nothing new to load",
    1: "a topic that does not exist: an operator must act",
    2: "a key the config does not know",
    75: "Kafka unreachable: retry later",
    99: "the lock held by another run (--lock-held-exit-code 99)",
}
EXIT_CODES = sorted(EXIT_CASES) if ALL_EXIT_CODES else [2]


@pytest.mark.parametrize("code", EXIT_CODES)
def test_cluster_mode_exit_codes_as_spark_submit_and_yarn_report_them(
        code, yarn, yarn_archive, probes, submit_dir, new_topic, yarn_config):
    """spark-submit exits 0 when the job did, and 1 for every failed application, whatever the
    job's code; YARN's diagnostics hold that code ("User application exited with status N")."""
    topic = new_topic(partitions=1)
    sections: dict = {}
    if code == 1:
        topic = f"no-such-topic-{uuid.uuid4().hex[:8]}"
    elif code == 2:
        sections = {"job": {"no_such_key": "1"}}
    elif code == 75:
        sections = {"kafka": {"bootstrap.servers": "127.0.0.1:1", "fetch_timeout_seconds": "5"}}
    config = yarn_config(topic, **sections)
    args = ("--lock-held-exit-code", "99") if code == 99 else ()
    schema = config.parent / EVENTS_SCHEMA.name

    def run() -> Submission:
        return submit(yarn, "cluster", config, yarn_archive, probes, files=(schema,), args=args, cwd=submit_dir)

    if code == 99:
        cfg = load_config(config)
        with ZkStateStore(cfg.zookeeper, cfg.job.name, cfg.retry) as holder:
            assert holder.session.acquire_lock() is None
            done = run()
    else:
        done = run()

    if code == 0:
        assert done.result.returncode == 0, done.output
        assert (done.app["state"], done.app["finalStatus"]) == ("FINISHED", "SUCCEEDED"), done.app
        return
    assert done.result.returncode == 1, done.output  # spark-submit: 1 for every failed application
    assert f"Application {done.app_id} finished with failed status" in done.result.stderr, done.output
    assert (done.app["state"], done.app["finalStatus"]) == ("FAILED", "FAILED"), done.app
    said = f"User application exited with status {code}"
    assert said in done.app["diagnostics"], done.app["diagnostics"]
    status = yarn.cli("application", "-status", done.app_id)
    assert said in status.stdout, status.stdout + status.stderr
    assert code_from_diagnostics(yarn, done.app_id) == str(code)
    print(f"[yarn] exit {code} ({EXIT_CASES[code]}): spark-submit {done.result.returncode}, YARN "
          f"{done.app['state']}/{done.app['finalStatus']}, {done.seconds:.0f}s; diagnostics: "
          f"{done.app['diagnostics'][:300]!r}")


def test_cluster_mode_a_lock_held_skip_with_the_default_code_ends_succeeded(
        yarn, yarn_archive, probes, submit_dir, new_topic, yarn_config):
    """The driver exits 0 without the batch's SparkContext: the ApplicationMaster, which fails an
    application whose driver made none, is handed one (etl.hive.spark), so YARN says SUCCEEDED and
    spark-submit exits 0, as for a skipped run in client mode. Nothing is loaded or committed."""
    config = yarn_config(new_topic(partitions=1))
    cfg = load_config(config)
    with ZkStateStore(cfg.zookeeper, cfg.job.name, cfg.retry) as holder:
        assert holder.session.acquire_lock() is None
        done = submit(yarn, "cluster", config, yarn_archive, probes, files=(config.parent / EVENTS_SCHEMA.name,),
                      cwd=submit_dir)
        assert done.result.returncode == 0, done.output
        assert (done.app["state"], done.app["finalStatus"]) == ("FINISHED", "SUCCEEDED"), done.app
        assert holder.offsets.committed_offsets() == {}, "a skipped run committed offsets"
    print(f"[yarn] lock-held skip, default code 0: spark-submit 0, YARN {done.app['state']}/"
          f"{done.app['finalStatus']}, {done.seconds:.0f}s")


# docs/cluster.md's line for a scheduler that needs the job's exit code in cluster mode.
EXIT_CODE_OF_APP = (f'{YARN_CLI} application -status "$APP" '
                    "| sed -n '/User application exited with status/{s/.*exited with status \\([0-9]*\\).*/\\1/p;q}'")


def code_from_diagnostics(yarn: PrivateYarn, app_id: str) -> str:
    """What that line prints for the application, run as the docs give it."""
    env = {**os.environ, "HADOOP_CONF_DIR": str(yarn.conf_dir), "APP": app_id}
    done = subprocess.run(["bash", "-o", "pipefail", "-c", EXIT_CODE_OF_APP], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()
