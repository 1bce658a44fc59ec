"""Event times in years 1-999, on the real services (issue 26, defect 2): partition names are
zero-padded, and what an older release named unpadded (`dt=1-01-02`) has a tested way out.

The older release is this tree with its naming put back as it was (strftime's %Y, which glibc
does not pad, and strptime to read it), run as a real `etl run` whose driver and Spark workers
import that copy (PYTHONPATH). So the state it leaves is the one the older release left:
  - with markers on, its run stops before registering (`cannot read its time window`), its
    batch open with parts and manifests under the unpadded names: the next run of this release
    finishes the batch, moving the parts to the padded names before it registers them;
  - with markers off, its batch commits the unpadded partitions: `etl verify` names them, and
    `etl recover` moves every file to the padded partition, each exactly once (also when killed
    half way), and drops the old one.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from etl.config import load_config
from etl.ops.verify import run_verify
from etl.sink.markers import MARKER_NAME
from tests.harness.etl_process import run_etl
from tests.harness.oracle import expected_offsets, table_offsets
from tests.harness.paths import REPO
from tests.harness.state import wait_for_lock_release

DB = "etl_test"
TIMES = ["0001-01-02T05:30:00Z", "0792-02-27T10:00:00Z", "2026-11-20T10:00:00Z"]
PADDED = {0: ("0001-01-02", "05"), 1: ("0792-02-27", "10"), 2: ("2026-11-20", "10")}
RANGE_QUERY = "dt >= '0001-01-01' AND dt < '1000-01-01'"

# What releases before the padding did: etl.model.partitioning as it was (issue 26).
OLD_NAMING = '''

def _old_values_of_wall(self, wall):
    values = {"dt": wall.strftime("%Y-%m-%d")}
    if self.granularity is Granularity.HOUR:
        values["hour"] = wall.strftime("%H")
    return values


def _old_wall_start(self, values):
    start = dt.datetime.strptime(values["dt"], "%Y-%m-%d")
    return start.replace(hour=int(values["hour"])) if self.granularity is Granularity.HOUR else start


TimePartitioner.values_of_wall = _old_values_of_wall
TimePartitioner._wall_start = _old_wall_start
'''


def older_release(tmp_path: Path) -> dict:
    """The environment that makes `etl` (driver and Spark workers) import the older naming."""
    copy = tmp_path / "older-release"
    shutil.copytree(REPO / "etl", copy / "etl", ignore=shutil.ignore_patterns("__pycache__"))
    with open(copy / "etl" / "model" / "partitioning.py", "a") as module:
        module.write(OLD_NAMING)
    return {"PYTHONPATH": str(copy)}


def event(i: int, ts: str) -> bytes:
    return json.dumps({"event_id": i, "ts": ts}).encode()


def placed(spark, table: str, where: str = "true") -> dict:
    spark.sql(f"REFRESH TABLE `{DB}`.`{table}`")
    rows = spark.sql(f"SELECT kafka_offset, dt, hour FROM `{DB}`.`{table}` WHERE {where}").collect()
    return {r.kafka_offset: (r.dt, r.hour) for r in rows}


def hive_partitions(spark, table: str) -> list[str]:
    return sorted(r[0] for r in spark.sql(f"SHOW PARTITIONS `{DB}`.`{table}`").collect())


def data_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.parquet"))


def loaded_by_older_release(tmp_path, monkeypatch, new_topic, produce, write_config, **hive):
    topic = new_topic(partitions=1)
    produce(topic, {0: [event(i, ts) for i, ts in enumerate(TIMES)]})
    # ZooKeeper's shortest session (as the crash tests): a killed recover's lock goes in 4 s, not 10
    config = write_config(kafka={"topics": topic}, hive={"partition_by": "column:ts", **hive},
                          zookeeper={"session_timeout_seconds": "4"})
    with monkeypatch.context() as scope:
        # Spark's Python workers run `python -m`, which puts their working folder first on the
        # path: out of the repository, they import the older release too.
        scope.chdir(tmp_path)
        return topic, config, run_etl(config, env=older_release(tmp_path))


def test_a_run_stopped_by_an_unpadded_name_is_finished_under_the_padded_names(
        tmp_path, monkeypatch, spark, new_topic, produce, write_config, hive_table_name, warehouse_dir):
    topic, config, old = loaded_by_older_release(tmp_path, monkeypatch, new_topic, produce, write_config,
                                                 success_markers="true", success_marker_delay_seconds="0")
    assert old.returncode == 1, old.describe()
    assert "cannot read its time window: time data '1-01-02' does not match format '%Y-%m-%d'" in old.stderr
    table = warehouse_dir / f"{DB}.db" / hive_table_name
    assert data_files(table / "dt=1-01-02" / "hour=05") and data_files(table / "dt=792-02-27" / "hour=10")

    new = run_etl(config)
    assert new.returncode == 0, new.describe()
    assert placed(spark, hive_table_name) == PADDED
    assert table_offsets(spark, DB, hive_table_name) == expected_offsets(topic, {0: 3})
    assert not any(p.startswith(("dt=1-", "dt=792-")) for p in hive_partitions(spark, hive_table_name))
    assert not data_files(table / "dt=1-01-02" / "hour=05") and not data_files(table / "dt=792-02-27" / "hour=10")
    assert set(placed(spark, hive_table_name, RANGE_QUERY)) == {0, 1}
    assert (table / "dt=0001-01-02" / "hour=05" / MARKER_NAME).exists()  # the watermark (2026) passed it
    assert run_verify(load_config(config), deep=True).ok


def test_etl_recover_killed_half_way_then_run_again_moves_committed_unpadded_partitions_exactly_once(
        tmp_path, monkeypatch, zk, spark, new_topic, produce, write_config, hive_table_name,
        warehouse_dir):
    topic, config, old = loaded_by_older_release(tmp_path, monkeypatch, new_topic, produce, write_config)
    assert old.returncode == 0, old.describe()
    assert "dt=1-01-02/hour=05" in hive_partitions(spark, hive_table_name)
    assert set(placed(spark, hive_table_name, RANGE_QUERY)) == {0}  # '792-02-27' sorts after '1000-01-01'
    report = run_verify(load_config(config), deep=False)
    assert {p.where for p in report.problems if p.kind == "legacy_partition_name"} == {
        "dt=1-01-02/hour=05", "dt=792-02-27/hour=10"}, report.render()

    produce(topic, {0: [event(3, "0001-01-02T05:45:00Z")]})  # a new row of a legacy hour: to the padded name
    assert run_etl(config).returncode == 0
    table = warehouse_dir / f"{DB}.db" / hive_table_name
    assert data_files(table / "dt=0001-01-02" / "hour=05") and data_files(table / "dt=1-01-02" / "hour=05")
    assert table_offsets(spark, DB, hive_table_name) == expected_offsets(topic, {0: 4})

    # Killed after its first file moved: the next recover moves the rest, as a first one moves all.
    # (A case without the kill, a subset of this one, was cut on 2026-11-29: 28 s of the suite.)
    killed = run_etl(config, "--execute", command="recover", fault="legacy:file-moved", action="kill")
    assert killed.returncode != 0, killed.describe()
    assert table_offsets(spark, DB, hive_table_name) == expected_offsets(topic, {0: 4})  # each row once
    wait_for_lock_release(zk, config)  # the killed run's session expires
    recovered = run_etl(config, "--execute", command="recover")
    assert recovered.returncode == 0, recovered.describe()
    assert "moved to dt=0792-02-27/hour=10" in recovered.stdout, recovered.describe()
    assert placed(spark, hive_table_name) == {**PADDED, 3: ("0001-01-02", "05")}
    assert table_offsets(spark, DB, hive_table_name) == expected_offsets(topic, {0: 4})
    assert set(placed(spark, hive_table_name, RANGE_QUERY)) == {0, 1, 3}
    assert not any(p.startswith(("dt=1-", "dt=792-")) for p in hive_partitions(spark, hive_table_name))
    assert run_verify(load_config(config), deep=True).ok
    again = run_etl(config, "--execute", command="recover")
    assert again.returncode == 0 and "nothing to repair" in again.stdout, again.describe()
