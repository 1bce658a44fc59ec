"""Faults of a REAL HDFS under `etl run`, each with a clear message and nothing lost: the DataNode
SIGKILLed during an upload, the NameNode SIGSTOPped during a rename, the NameNode in safe mode,
a space quota exceeded on the table's folder. After each, the daemons are made whole again and
a rerun completes the job: the exactly-once oracle (tests/harness/oracle.py) holds, every
produced (topic, partition, offset) once in Hive, read through hdfs://.

A killed or stopped daemon, or safe mode, reaches beyond a test's own folder: those take a
private NameNode and DataNode (tests/harness/hdfs.py PrivateHdfs, the shared pair's settings),
one for this module. A space quota is set on the test's own table folder, on the shared pair.

The faults the real daemons cannot produce on cue (a dropped connection mid-request, a RENAME
whose answer was lost, a standby NameNode) stay on the WebHDFS protocol server, in
tests/unit/test_fs_contract.py.
"""
from __future__ import annotations

import posixpath
from pathlib import Path

import pytest

from etl.errors import EXIT_BATCH_FAILED, EXIT_RETRYABLE
from tests.harness.data import DataSource
from tests.harness.etl_process import EtlProcess, run_etl
from tests.harness.hdfs import PrivateHdfs, copy_to_local
from tests.harness.kills import CLEANUP
from tests.harness.oracle import check_exactly_once, hive_reader
from tests.harness.services import paused
from tests.harness.state import job_state

pytestmark = pytest.mark.cell("hdfs-3.5")

DB = "etl_test"
SLEEPING = ("hrtimer_nanosleep", "do_nanosleep")


@pytest.fixture(scope="module")
def private_hdfs(tmp_path_factory):
    with PrivateHdfs(tmp_path_factory.mktemp("private-hdfs")) as cluster:
        yield cluster


def hdfs_config(write_config, topic, hdfs, root, **warehouse):
    return write_config(kafka={"topics": topic}, zookeeper={"session_timeout_seconds": "4"},
                        warehouse=hdfs.warehouse(root, **warehouse))


def errors(run) -> list[str]:
    return [line for line in run.stderr.splitlines() if line.startswith("etl: error")]


def temp_of(fs, folder: str, topic: str, partition: int):
    """A temp file of `partition` under `folder` with bytes in it, else None."""
    for path in fs.walk_files(folder):
        name = posixpath.basename(path)
        if name.startswith("_tmp.") and f".{topic}+{partition}+" in name and fs.info(path).size > 0:
            return path
    return None


def paused_task(run: EtlProcess, port: int | None = None) -> int | None:
    """A Python worker of the run sleeping at a fault point (with a connection to `port` open)."""
    run.tree.snapshot()
    for proc in run.tree.alive():
        try:
            if (Path(f"/proc/{proc.pid}/wchan").read_text().strip() in SLEEPING and "python" in proc.name()
                    and (port is None
                         or any(c.raddr and c.raddr.port == port for c in proc.net_connections(kind="tcp")))):
                return proc.pid
        except (OSError, Exception):  # psutil.Error: the process ended meanwhile
            continue
    return None


def rerun_is_exactly_once(spark, config, source, hdfs, root, tmp_path) -> str:
    rerun = run_etl(config)
    assert rerun.returncode == 0 and "COMMITTED" in rerun.stdout, rerun.describe()
    local = copy_to_local(hdfs.filesystem(), root, tmp_path / "warehouse-copy")
    return check_exactly_once(hive_reader(spark), config, source.expected, local).describe()


def test_datanode_sigkilled_during_an_upload_fails_the_run_and_a_rerun_is_exactly_once(
        spark, private_hdfs, new_topic, produce, write_config, tmp_path):
    hdfs = private_hdfs.hdfs
    topic = new_topic(partitions=2)
    source = DataSource(topic, 2, produce)
    source.produce({0: 200, 1: 20_000})  # partition 1's first chunk is only part of its range
    root = hdfs.job_folder("datanode-killed")
    config = hdfs_config(write_config, topic, hdfs, root)
    run = EtlProcess(config, fault="writing:1", action="sleep:8")  # long enough to be seen and the DataNode killed
    try:
        run.wait_until(lambda: paused_task(run, private_hdfs.ports[3]) is not None, 400,
                       "partition 1's task paused mid-upload to the DataNode")
        private_hdfs.kill("datanode")
        code = run.wait(600)
    finally:
        run.kill(CLEANUP)
        run.reap()
    assert code == EXIT_RETRYABLE, run.describe()
    assert any("upload to the DataNode" in line and "the file is incomplete" in line for line in errors(run)), \
        run.describe()
    assert job_state(config).committed == {}
    print(f"[hdfs] DataNode killed mid-upload: exit {code}: {errors(run)}")

    private_hdfs.start("datanode")
    private_hdfs.wait_serving()
    print(f"[hdfs] DataNode back: {rerun_is_exactly_once(spark, config, source, hdfs, root, tmp_path)}")


def test_namenode_sigstopped_during_a_rename_fails_the_run_and_a_rerun_is_exactly_once(
        spark, private_hdfs, new_topic, produce, write_config, tmp_path):
    hdfs = private_hdfs.hdfs
    topic = new_topic(partitions=1)  # one task: the one whose RENAME meets the stopped NameNode
    source = DataSource(topic, 1, produce)
    source.produce(300)
    root = hdfs.job_folder("namenode-stopped")
    config = hdfs_config(write_config, topic, hdfs, root, timeout_seconds="5")
    fs = hdfs.filesystem()
    run = EtlProcess(config, fault="closed:0", action="sleep:4")  # long enough to be seen and the NameNode stopped
    try:  # the upload has its DataNode's answer: the task sleeps before its RENAME
        run.wait_until(lambda: paused_task(run) is not None and temp_of(fs, root, topic, 0) is not None, 400,
                       "the task paused with its temp file complete")
        with paused(private_hdfs.pid("namenode")):  # the task's RENAME meets a frozen NameNode
            code = run.wait(600)
    finally:
        run.kill(CLEANUP)
        run.reap()
    assert code == EXIT_RETRYABLE, run.describe()
    assert any("RENAME" in line and "no answer" in line and "is up and reachable" in line
               for line in errors(run)), run.describe()
    assert job_state(config).committed == {}
    print(f"[hdfs] NameNode stopped at the rename: exit {code}: {errors(run)}")
    print(f"[hdfs] NameNode resumed: {rerun_is_exactly_once(spark, config, source, hdfs, root, tmp_path)}")


def test_namenode_in_safe_mode_fails_the_batch_and_a_rerun_is_exactly_once(
        spark, private_hdfs, new_topic, produce, write_config, tmp_path):
    hdfs = private_hdfs.hdfs
    topic = new_topic(partitions=2)
    source = DataSource(topic, 2, produce)
    source.produce(300)
    root = hdfs.job_folder("safe-mode")
    config = hdfs_config(write_config, topic, hdfs, root)
    run = EtlProcess(config, fault="state:PLANNED", action="sleep:10")
    try:
        run.wait_until(lambda: job_state(config).last_state == "PLANNED", 400, "batch 1 PLANNED", poll=0.2)
        hdfs.dfsadmin("-safemode", "enter")
        try:
            code = run.wait(600)
        finally:
            hdfs.dfsadmin("-safemode", "leave")
    finally:
        run.kill(CLEANUP)
        run.reap()
    assert code == EXIT_RETRYABLE, run.describe()
    assert any("in safe mode" in line and "run again once it has left safe mode" in line
               for line in errors(run)), run.describe()
    assert job_state(config).committed == {}
    print(f"[hdfs] NameNode in safe mode: exit {code}: {errors(run)}")
    print(f"[hdfs] safe mode left: {rerun_is_exactly_once(spark, config, source, hdfs, root, tmp_path)}")


def test_a_space_quota_exceeded_on_the_table_folder_fails_clearly_and_a_rerun_is_exactly_once(
        spark, hdfs, new_topic, produce, write_config, hive_table_name, tmp_path):
    topic = new_topic(partitions=2)
    source = DataSource(topic, 2, produce)
    source.produce(300)
    root = hdfs.job_folder("quota")
    table_dir = f"{root}/{DB}.db/{hive_table_name}"
    hdfs.filesystem().makedirs(table_dir)
    hdfs.dfsadmin("-setSpaceQuota", "1k", table_dir)  # less than one block: no file fits
    config = hdfs_config(write_config, topic, hdfs, root)
    failed = run_etl(config)
    assert failed.returncode == EXIT_BATCH_FAILED, failed.describe()  # an operator must act
    assert any("quota" in line and "-setSpaceQuota" in line for line in errors(failed)), failed.describe()
    assert job_state(config).committed == {}
    print(f"[hdfs] space quota exceeded: exit {failed.returncode}: {errors(failed)}")

    hdfs.dfsadmin("-clrSpaceQuota", table_dir)
    print(f"[hdfs] quota cleared: {rerun_is_exactly_once(spark, config, source, hdfs, root, tmp_path)}")


def test_a_table_folder_the_job_may_not_write_exits_1_naming_it_and_the_permission(
        spark, private_hdfs, new_topic, produce, write_config, hive_table_name, tmp_path):
    """Permissions on (scripts/stack/hdfs-node), the job as its own user: its table's folder,
    made by the superuser and not given to it, fails the run with exit 1, the folder and the
    missing permission named, nothing committed; once given to the job, a rerun loads it once."""
    hdfs = private_hdfs.hdfs
    topic = new_topic(partitions=2)
    source = DataSource(topic, 2, produce)
    source.produce(300)
    root = hdfs.job_folder("denied")  # the job's own, with the database's folder in it
    hdfs.filesystem().makedirs(f"{root}/{DB}.db")
    table_dir = f"{root}/{DB}.db/{hive_table_name}"
    hdfs.admin().makedirs(table_dir)  # the superuser's, mode 755: the job may not write it
    config = hdfs_config(write_config, topic, hdfs, root)
    failed = run_etl(config)
    assert failed.returncode == EXIT_BATCH_FAILED, failed.describe()  # an operator must act
    assert any(f"HDFS user etl lacks WRITE permission on {table_dir} (owner " in line
               and f"hdfs dfs -chown -R etl {table_dir}" in line for line in errors(failed)), failed.describe()
    assert job_state(config).committed == {}
    print(f"[hdfs] table folder not the job's: exit {failed.returncode}: {errors(failed)}")

    hdfs.admin().set_owner(table_dir, owner="etl")
    print(f"[hdfs] folder given to the job: {rerun_is_exactly_once(spark, config, source, hdfs, root, tmp_path)}")
