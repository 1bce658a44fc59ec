"""The cluster recipe of docs/cluster.md on a Spark standalone cluster of the session's own (a
Master and two 1-core Workers, tests/harness/spark_standalone.py): `spark-submit --master
spark://... --archives ENV.tar.gz#environment` in client mode, the driver on the archive's
python unpacked as on an edge node, the executors on ./environment/bin/python.

The test cannot pass when the job ran in local mode by mistake: it finds its application on
the Master, its executors in both Workers' work folders, and the probe's records of the Python
processes that ran there (tests/harness/cluster_submit.py). The test SIGKILLs, in the middle
of a batch, the executor JVM and the Python workers of the executor that is writing partition 0
(held at the fault point closed:0, its temp file complete and not yet renamed): Spark reruns
the task on a new executor, and the table holds every offset once, in files that tile them.
"""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.harness.cluster_submit import check_executors_loaded_the_archive, probe_dir, read_probes, spark_submit
from tests.harness.data import events_by_partition
from tests.harness.kills import CLEANUP, sigkill
from tests.harness.oracle import check_exactly_once, expected_offsets, hive_reader

pytestmark = [pytest.mark.slow, pytest.mark.cell("spark-standalone")]

SLEEPING = {"35", "230"}  # nanosleep, clock_nanosleep: Python's time.sleep (x86-64 syscall numbers)


def app_ids(cluster) -> set[str]:
    master = cluster.master_json()
    return {app["id"] for app in master["activeapps"] + master["completedapps"]}


def submit(cluster, config: Path, archive: Path, driver_python: Path, probes: Path, cwd: Path, *conf: str):
    """Start the client-mode spark-submit in a session of its own, its output in cwd."""
    cwd.mkdir()
    line = spark_submit(cluster.url, config, archive=archive, driver_python=driver_python, probes=probes, conf=conf)
    with open(cwd / "stdout", "wb") as out, open(cwd / "stderr", "wb") as err:
        return subprocess.Popen(line.command, env=line.env, cwd=cwd, stdout=out, stderr=err,
                                stdin=subprocess.DEVNULL, start_new_session=True)


def finish(proc: subprocess.Popen, cwd: Path, timeout: float = 600) -> tuple[str, str]:
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        sigkill(proc.pid, "spark-submit", group=True, purpose=CLEANUP)
        proc.wait()
    stdout, stderr = (cwd / "stdout").read_text(errors="replace"), (cwd / "stderr").read_text(errors="replace")
    assert proc.returncode == 0, f"exit {proc.returncode}\n{stdout}\n{stderr[-6000:]}"
    return stdout, stderr


def new_app(cluster, before: set[str]) -> str:
    [app_id] = app_ids(cluster) - before
    assert app_id.startswith("app-"), app_id
    return app_id


def check_both_workers_ran_python(cluster, app_id: str, executors: list[dict]) -> dict[int, set[Path]]:
    """Each Worker ran executors of the app, and Python tasks ran in its executors' folders."""
    dirs = cluster.executor_dirs(app_id)
    python_dirs = {Path(p["cwd"]) for p in executors}
    ran = {port: python_dirs & set(found) for port, found in dirs.items()}
    assert all(ran.values()), (dirs, python_dirs)  # Python tasks on both Workers, not local[*]
    assert python_dirs <= {d for found in dirs.values() for d in found}, (dirs, python_dirs)
    return ran


def processes_in(folder: Path) -> dict[int, str]:
    """pid -> command line of every process whose working folder is `folder`."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.readlink(entry / "cwd") == str(folder):
                    found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
    return found


def sleeping_task(work_root: Path) -> Path | None:
    """The folder of the executor whose Python worker sleeps at the fault point, if one does."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = Path(os.readlink(entry / "cwd"))
            if (work_root in cwd.parents and b"environment/bin/python" in (entry / "cmdline").read_bytes()
                    and (entry / "syscall").read_text().split()[0] in SLEEPING):
                return cwd
        except (OSError, IndexError):
            continue
    return None


def test_spark_submit_runs_on_both_workers_and_a_sigkilled_executor_is_replaced_and_its_task_rerun_exactly_once(
        spark_standalone, packed_env, edge_node_python, spark, new_topic, produce, write_config, warehouse_dir,
        tmp_path):
    topic = new_topic(partitions=4)
    produce(topic, events_by_partition(4, 250))
    # The config keeps [spark] spark.master = local[2]: spark-submit's --master must win over it.
    config = write_config(kafka={"topics": topic})
    probes = probe_dir(tmp_path)
    before = app_ids(spark_standalone)

    # Every attempt of partition 0's task sleeps 10 s at closed:0 (its temp file complete, not
    # renamed): the first attempt is the one killed, the rerun sleeps too and then publishes.
    started = time.monotonic()
    proc = submit(spark_standalone, config, packed_env, edge_node_python, probes, tmp_path / "submit",
                  "spark.executorEnv.ETL_FAULT_POINT=closed:0", "spark.executorEnv.ETL_FAULT_ACTION=sleep:10")
    victim = None
    deadline = time.monotonic() + 300
    while victim is None and proc.poll() is None and time.monotonic() < deadline:
        victim = sleeping_task(spark_standalone.workdir)
        time.sleep(0.2)
    assert victim is not None, "partition 0's task never reached closed:0 on an executor"
    killed = processes_in(victim)
    sigkill(killed, "Spark executor")
    assert any("CoarseGrainedExecutorBackend" in cmd for cmd in killed.values()), killed
    assert any("environment/bin/python" in cmd for cmd in killed.values()), killed
    stdout, stderr = finish(proc, tmp_path / "submit")
    seconds = time.monotonic() - started
    app_id = new_app(spark_standalone, before)
    try:
        assert victim.parent.name == app_id, (victim, app_id)
        assert "batch 1 (new) COMMITTED: 4 files, 1000 rows, 0 rejected" in stdout, stdout
        assert "Lost executor" in stderr, stderr[-6000:]
        executors = spark_standalone.executors(app_id)
        states = spark_standalone.finished_states(app_id)
        lost_lines = [line for line in stderr.splitlines() if "Lost executor" in line or "Lost task" in line]
        assert states.pop(int(victim.name)) == ("EXITED", 137), states  # the one SIGKILLed
        # The others were stopped at the app's end, by the driver or by their Worker, whichever came first.
        assert states and {status for _, status in states.values()} <= {0, 143}, states
        assert all(executors.values()), executors  # each Worker's /json/ lists an executor of the app
        assert sum(map(len, executors.values())) >= 3, executors  # a new executor replaced it
        probed = check_executors_loaded_the_archive(read_probes(probes), edge_node_python, spark_standalone.workdir)
        check_both_workers_ran_python(spark_standalone, app_id, probed)
        report = check_exactly_once(hive_reader(spark), config, expected_offsets(topic, {p: 250 for p in range(4)}),
                                    warehouse_dir, run_verify=False)
    finally:
        spark_standalone.remove_app(app_id)
    print(f"[standalone] {app_id}: SIGKILLed executor {victim.name} ({len(killed)} processes: "
          f"{sorted(cmd.split()[0].rsplit('/', 1)[-1] for cmd in killed.values())}) mid-batch; executors per "
          f"worker UI port {executors}, the others finished {states}; {seconds:.0f}s; {report.describe()}")
    print("\n".join(lost_lines))
