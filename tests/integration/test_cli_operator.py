"""The operator's command line against the real stack: every stderr line JSON under
--log-format json (the driver JVM's too), `etl run --dry-run` shows the plan a run would make
and touches nothing, and `etl check` answers as a Nagios plugin in all four states."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from kazoo.exceptions import NoNodeError

from tests.harness.data import events_by_partition
from tests.harness.etl_process import ProcessTree
from tests.harness.ports import free_port

REPO = Path(__file__).resolve().parents[2]


class Done:
    def __init__(self, popen: subprocess.Popen, stdout: str, stderr: str, tree: ProcessTree):
        self.returncode, self.stdout, self.stderr = popen.returncode, stdout, stderr
        self.java = tree.matching("java")  # a driver JVM this command started, if any

    def __repr__(self) -> str:
        return f"exit {self.returncode}\nstdout:\n{self.stdout[-4000:]}\nstderr:\n{self.stderr[-6000:]}"


def etl(*args: str, env: dict | None = None) -> Done:
    """`python -m etl ...` of this tree, as a program, with the processes it started noted."""
    run_env = {k: v for k, v in os.environ.items() if k not in ("ETL_LOG_FORMAT", "ETL_FAULT_POINT")}
    run_env.update({"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable, **(env or {})})
    popen = subprocess.Popen([sys.executable, "-m", "etl", *args], cwd=REPO, env=run_env, text=True,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True)
    tree = ProcessTree(popen)
    try:
        stdout, stderr = popen.communicate(timeout=600)
    finally:
        tree.snapshot()
        tree.stop()
    return Done(popen, stdout, stderr, tree)


def json_records(text: str) -> list[dict]:
    records = []
    for line in text.splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            raise AssertionError(f"not a JSON line: {line!r}") from None
        assert isinstance(records[-1], dict), line
    return records


# -- --log-format json ------------------------------------------------------------------------
def test_every_line_real_commands_write_to_stderr_is_json(new_topic, produce, write_config):
    topic = new_topic(partitions=2)
    produce(topic, events_by_partition(2, 10))
    # A deprecated key: Spark's SparkConf warns of it through log4j in the driver JVM, at start.
    config = str(write_config(kafka={"topics": topic}, spark={"spark.cache.class": "unused"}))
    status = etl("-v", "status", "--config", config, "--log-format", "json")
    assert status.returncode == 0, status
    assert any(r["logger"].startswith("kazoo") for r in json_records(status.stderr)), status
    bad_flag = etl("status", "--config", config, "--max-lag", "many", "--log-format", "json")
    assert bad_flag.returncode == 2, bad_flag
    [usage] = json_records(bad_flag.stderr)
    assert "--max-lag" in usage["message"] and usage["level"] == "ERROR"
    run = etl("run", "-v", "--config", config, "--log-format", "json")
    assert run.returncode == 0, run
    records = json_records(run.stderr)
    print(f"[json logs] etl run -v: {len(records)} stderr lines, loggers "
          f"{sorted({r['logger'] for r in records if not r['logger'].startswith('etl')})}")
    jvm = [r for r in records if r["logger"] == "org.apache.spark.SparkConf"]
    assert jvm and jvm[0]["level"] == "WARNING" and "spark.cache.class" in jvm[0]["message"], records
    assert len({r.get("job") for r in records}) == 1 and records[-1]["job"], records  # the JVM's lines too
    assert any(r["message"].startswith("batch 1 LOAD PLANNED") and r["batch_id"] == 1 for r in records)


# -- etl run --dry-run ------------------------------------------------------------------------
def zk_tree(zk, root: str) -> dict | None:
    """Every node under root with its data and every counter ZooKeeper keeps of its changes
    (a node created and deleted again, such as a lock, moves its parent's cversion and pzxid)."""
    try:
        data, stat = zk.get(root)
    except NoNodeError:
        return None
    tree = {root: (data, stat.version, stat.cversion, stat.mzxid, stat.pzxid)}
    for child in zk.get_children(root):
        tree.update(zk_tree(zk, f"{root}/{child}") or {})
    return tree


def files(folder: Path) -> dict | None:
    if not folder.exists():
        return None
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


def dry_run(config: str, *more: str) -> Done:
    done = etl("run", "--config", config, "--dry-run", *more)
    assert done.returncode == 0, done
    assert done.java == [], f"the dry run started a JVM: {done.java}"
    return done


def ranges(preview: dict) -> list[tuple]:
    return [(r["topic"], r["partition"], r["from"], r["until"], r["committed"]) for r in preview["ranges"]]


def test_dry_run_prints_the_plan_and_touches_nothing(new_topic, produce, write_config, zk, zk_root, warehouse_dir,
                                                     watermarks):
    topic = new_topic(partitions=2)
    produce(topic, events_by_partition(2, 6))
    config = str(write_config(kafka={"topics": topic}, job={"max_records_per_partition": "4"}))

    # Before the job's first command: nothing exists, and nothing is created.
    fresh = json.loads(dry_run(config, "--json").stdout)
    assert (fresh["action"], ranges(fresh)) == ("new_batch", [(topic, 0, 0, 4, None), (topic, 1, 0, 4, None)])
    assert [r["left_after"] for r in fresh["ranges"]] == [2, 2]
    [target] = fresh["target"]["partitions"]
    assert re.fullmatch(r"dt=\d{4}-\d\d-\d\d/hour=\d\d", target["partition"]), target
    assert target["folder"].startswith(str(warehouse_dir)) and target["folder"].endswith(target["partition"])
    assert zk_tree(zk, zk_root) is None and files(warehouse_dir) is None

    loaded = etl("run", "--config", config)
    assert loaded.returncode == 0, loaded
    produce(topic, events_by_partition(2, 3))
    assert {p: high for p, (_, high) in watermarks(topic).items()} == {0: 9, 1: 9}

    # A job with committed offsets: the plan starts at them, and neither ZooKeeper nor the files move.
    before = zk_tree(zk, zk_root), files(warehouse_dir)
    text = dry_run(config).stdout
    preview = json.loads(dry_run(config, "--json").stdout)
    assert (zk_tree(zk, zk_root), files(warehouse_dir)) == before
    assert ranges(preview) == [(topic, 0, 6, 9, 6), (topic, 1, 6, 9, 6)]
    assert "would plan a new batch of 2 ranges, 6 offsets" in text, text
    for partition in (0, 1):
        assert re.search(rf"^  {re.escape(topic)}\s+{partition}\s+6\s+9\s+3$", text, re.M), text
    assert f"target partition: {preview['target']['partitions'][0]['partition']} at " in text

    # An open batch (the run stopped once its files were written): the dry run shows it, as recorded.
    stopped = etl("run", "--config", config, env={"ETL_FAULT_POINT": "state:WRITTEN", "ETL_FAULT_ACTION": "raise"})
    assert stopped.returncode != 0, stopped
    before = zk_tree(zk, zk_root), files(warehouse_dir)
    preview = json.loads(dry_run(config, "--json").stdout)
    assert (zk_tree(zk, zk_root), files(warehouse_dir)) == before
    assert (preview["action"], preview["batch_id"], preview["state"]) == ("complete_open_batch", 3, "WRITTEN")
    assert ranges(preview) == [(topic, 0, 6, 9, 6), (topic, 1, 6, 9, 6)]
    assert preview["target"]["partitions"][0]["folder"].startswith(str(warehouse_dir))
    assert "would complete batch 3 (LOAD, left WRITTEN by" in dry_run(config).stdout


def test_dry_run_by_event_time_says_the_partitions_are_known_after_reading(new_topic, produce, write_config, zk,
                                                                          zk_root):
    topic = new_topic(partitions=1)
    produce(topic, events_by_partition(1, 5))
    config = str(write_config(kafka={"topics": topic}, hive={"partition_by": "column:ts"}))
    preview = json.loads(dry_run(config, "--json").stdout)
    assert ranges(preview) == [(topic, 0, 0, 5, None)]
    assert preview["target"] == {"by_event_time": True, "partitions": None,
                                 "detail": "known only after reading: the rows' event times decide their partitions"}
    assert "target partitions: known only after reading" in dry_run(config).stdout
    assert zk_tree(zk, zk_root) is None


# -- etl check --------------------------------------------------------------------------------
def check(config, warn: int, crit: int) -> Done:
    done = etl("check", "--config", str(config), "--warn-lag", str(warn), "--crit-lag", str(crit))
    assert len(done.stdout.splitlines()) == 1, done
    return done


def test_check_answers_ok_warning_critical_and_unknown(new_topic, produce, write_config, zk, zk_root):
    topic = new_topic(partitions=2)
    produce(topic, {0: [b'{"n": 1}'] * 10, 1: [b'{"n": 1}'] * 4})
    config = write_config(kafka={"topics": topic})
    outcomes = {}
    for name, warn, crit in (("OK", 10, 20), ("WARNING", 5, 20), ("CRITICAL", 2, 9)):
        done = check(config, warn, crit)
        outcomes[name] = done.returncode
        assert done.stdout.startswith(f"ETL {name} - job "), done
        assert f"max lag 10 records ({topic}[0]), total lag 14 over 2 partitions" in done.stdout, done
        assert done.stdout.rstrip().endswith(f"| max_lag=10;{warn};{crit};0; total_lag=14;;;0;"), done
    assert zk_tree(zk, zk_root) is None  # a check writes nothing, not even the job's nodes
    status = etl("status", "--config", str(config), "--json")
    assert json.loads(status.stdout)["total_lag"] == 14, status  # the lag as `etl status` counts it

    missing_topic = write_config(kafka={"topics": f"{topic}-missing"})
    unreachable = write_config(kafka={"topics": topic}, zookeeper={"hosts": f"127.0.0.1:{free_port()}",
                                                                   "session_timeout_seconds": "1"})
    for config in (missing_topic, unreachable):
        done = check(config, 5, 10)
        outcomes.setdefault("UNKNOWN", set()).add(done.returncode)
        assert done.stdout.startswith("ETL UNKNOWN - "), done
    assert "ZooKeeper" in done.stdout, done
    assert outcomes == {"OK": 0, "WARNING": 1, "CRITICAL": 2, "UNKNOWN": {3}}
