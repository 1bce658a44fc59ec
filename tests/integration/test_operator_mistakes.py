"""The promise at its edges, on the real stack: what an operator (or the world) does to a loaded
job, and what `run`, `verify` and `recover` make of it. Each test reproduces one way the promise
used to break with `run` and `verify` both exiting 0."""
from __future__ import annotations

import functools
import json

from etl.config import load_config
from etl.ops.run import run_job
from etl.model.events import OffsetChange, PendingReset, Reset
from etl.ops.acting import Act
from etl.ops.recovery import RecoverOptions, recover
from etl.ops.verify import run_verify
from etl.state.store import ZkPaths, ZkStateStore
from tests.harness.data import events_by_partition, loaded_job
from tests.harness.etl_process import etl_command, run_etl
from tests.harness.oracle import expected_offsets, table_offsets
from tests.harness.state import rewrite_committed, wait_for_lock_release
from tests.harness.warehouse_files import DATA_SUFFIX
from test_pipeline import recreate_topic

DB = "etl_test"


# Each test starts from a loaded job: 2 partitions of 60 events (fewer where said).
loaded = functools.partial(loaded_job, per_partition=60)


def table_files(warehouse_dir, table, partition=None):
    files = sorted((warehouse_dir / f"{DB}.db" / table).rglob(f"*{DATA_SUFFIX}"))
    return [f for f in files if partition is None or f"+{partition}+" in f.name]


def committed(config) -> dict:
    cfg = load_config(config)
    with ZkStateStore(cfg.zookeeper, cfg.job.name, cfg.retry) as store:
        return {key: offset.value for key, offset in store.offsets.committed_offsets().items()}


def kinds(report) -> list[str]:
    return sorted({p.kind for p in report.problems})


def test_a_deleted_first_file_is_a_gap_and_recover_rewrites_it(
        spark, new_topic, produce, write_config, hive_table_name, warehouse_dir):
    topic, config = loaded(new_topic, produce, write_config, job={"max_records_per_partition": "20"})
    first = [f for f in table_files(warehouse_dir, hive_table_name, 0) if "+00000000000000000000+" in f.name]
    first[0].unlink()
    report = run_verify(load_config(config), deep=True)
    assert not report.ok and "gap" in kinds(report), report.render()
    assert "[0, 20)" in report.render()
    out = []
    assert recover(load_config(config), RecoverOptions(), out=out.append) == 0
    assert any("rewrite 1 committed ranges" in line for line in out), out
    assert recover(load_config(config), RecoverOptions(Act.EXECUTE), out=out.append) == 0
    assert table_offsets(spark, DB, hive_table_name) == expected_offsets(topic, {0: 60, 1: 60})
    assert run_verify(load_config(config), deep=True).ok


def test_a_partition_with_every_file_deleted_is_not_ok_and_is_rewritten(
        spark, new_topic, produce, write_config, hive_table_name, warehouse_dir):
    topic, config = loaded(new_topic, produce, write_config)
    for f in table_files(warehouse_dir, hive_table_name, 1):
        f.unlink()
    report = run_verify(load_config(config), deep=False)
    assert kinds(report) == ["gap"], report.render()
    assert "the partition has no file at all" in report.render() and f"{topic}[1]" in report.render()
    assert recover(load_config(config), RecoverOptions(Act.EXECUTE), out=print) == 0
    assert table_offsets(spark, DB, hive_table_name) == expected_offsets(topic, {0: 60, 1: 60})
    assert run_verify(load_config(config), deep=True).ok


def test_a_truncated_file_is_named_by_verify_deep_and_replaced_by_recover(
        spark, new_topic, produce, write_config, hive_table_name, warehouse_dir):
    topic, config = loaded(new_topic, produce, write_config)
    victim = table_files(warehouse_dir, hive_table_name, 0)[0]
    victim.write_bytes(victim.read_bytes()[:100])
    report = run_verify(load_config(config), deep=True)
    assert kinds(report) == ["corrupt_file"] and str(victim) in report.render(), report.render()
    assert recover(load_config(config), RecoverOptions(Act.EXECUTE), out=print) == 0
    assert table_offsets(spark, DB, hive_table_name) == expected_offsets(topic, {0: 60, 1: 60})
    assert run_verify(load_config(config), deep=True).ok
    assert list((warehouse_dir / "_etl_moved_aside").rglob(victim.name))  # kept, out of the table


def test_a_topic_recreated_with_more_records_is_refused_by_its_topic_id(
        spark, new_topic, produce, write_config, hive_table_name, kafka_admin):
    topic, config = loaded(new_topic, produce, write_config, partitions=1, per_partition=30)
    recreate_topic(kafka_admin, topic)
    produce(topic, events_by_partition(1, 80, first_id=1000))
    result = run_etl(config)
    assert result.returncode == 1, result.stderr[-2000:]
    assert "was deleted and recreated" in result.stderr and "topic id" in result.stderr
    assert committed(config) == {(topic, 0): 30}
    assert table_offsets(spark, DB, hive_table_name) == expected_offsets(topic, {0: 30})


def test_a_topic_recreated_with_more_records_is_refused_by_its_last_record_without_topic_ids(
        spark, new_topic, produce, write_config, hive_table_name, kafka_admin, zk):
    topic, config = loaded(new_topic, produce, write_config, partitions=1, per_partition=30)
    load_config(config)
    rewrite_committed(config, lambda offsets, ids: ids.pop(topic))  # as from a broker without topic ids
    recreate_topic(kafka_admin, topic)
    produce(topic, events_by_partition(1, 80, first_id=1000))
    result = run_etl(config)
    assert result.returncode == 1, result.stderr[-2000:]
    assert "the record at offset 29 is not the one the job loaded" in result.stderr
    assert committed(config) == {(topic, 0): 30}


def test_a_deleted_committed_pointer_stops_the_job_until_restored_as_the_error_says(
        spark, new_topic, produce, write_config, hive_table_name, zk):
    """Without the pointer, falling back to the offsets from before snapshots would load again
    everything since: the run refuses, names the fix, and after it loads on exactly once."""
    topic, config = loaded(new_topic, produce, write_config, partitions=2, per_partition=30)
    cfg = load_config(config)
    pointer = ZkPaths(cfg.zookeeper.root, cfg.job.name).committed
    zk.delete(pointer)
    produce(topic, events_by_partition(2, 20, first_id=1000))
    refused = run_etl(config)
    assert refused.returncode == 1, refused.stderr[-2000:]
    assert "committed pointer" in refused.stderr and "etl history --json" in refused.stderr
    assert table_offsets(spark, DB, hive_table_name) == expected_offsets(topic, {0: 30, 1: 30})
    history = etl_command(config, "history", "--json")
    assert history.returncode == 0, history.stderr[-2000:]
    last = next(b for b in json.loads(history.stdout)["batches"] if b["state"] == "COMMITTED")
    zk.create(pointer, json.dumps({"snapshot": last["snapshot"]}).encode())  # what the error says to do
    assert run_etl(config).returncode == 0
    assert table_offsets(spark, DB, hive_table_name) == expected_offsets(topic, {0: 50, 1: 50})


def test_the_last_record_stored_at_commit_is_the_ranges_last(new_topic, produce, write_config, zk, spark):
    topic, config = loaded(new_topic, produce, write_config, partitions=1, per_partition=30)
    cfg = load_config(config)
    with ZkStateStore(cfg.zookeeper, cfg.job.name, cfg.retry) as store:
        stored = store.offsets.committed_offsets()[(topic, 0)]
    assert stored.value == 30 and stored.origin == 0 and stored.last.offset == 29


def test_a_second_job_on_an_owned_table_is_refused_before_it_writes(
        spark, new_topic, produce, write_config, hive_table_name, warehouse_dir):
    topic, config = loaded(new_topic, produce, write_config)
    second = write_config(kafka={"topics": topic}, job={"name": "another-job"})
    result = run_etl(second)
    assert result.returncode == 2, result.stderr[-2000:]
    assert f"table etl_test.{hive_table_name} is loaded by another job" in result.stderr
    assert table_offsets(spark, DB, hive_table_name) == expected_offsets(topic, {0: 60, 1: 60})


def test_the_same_job_pointed_at_another_table_is_refused_naming_both(
        spark, new_topic, produce, write_config, hive_table_name):
    topic, config = loaded(new_topic, produce, write_config)
    produce(topic, events_by_partition(2, 10, first_id=500))
    moved = write_config(kafka={"topics": topic}, hive={"table": f"{hive_table_name}_b"})
    result = run_etl(moved)
    assert result.returncode == 2, result.stderr[-2000:]
    assert f"bound to etl_test.{hive_table_name} at" in result.stderr
    assert f"the config names etl_test.{hive_table_name}_b" in result.stderr and "etl bind" in result.stderr
    assert committed(config) == {(topic, 0): 60, (topic, 1): 60}


def test_a_batch_planned_for_one_table_is_not_resumed_into_another(
        spark, new_topic, produce, write_config, hive_table_name, zk):
    # ZooKeeper's shortest session (as the crash tests): the killed run's lock goes in 4 s, not 10
    topic, config = loaded(new_topic, produce, write_config, zookeeper={"session_timeout_seconds": "4"})
    produce(topic, events_by_partition(2, 10, first_id=500))
    assert run_etl(config, fault="state:PLANNED").returncode == -9
    wait_for_lock_release(zk, config)
    moved = write_config(kafka={"topics": topic}, hive={"table": f"{hive_table_name}_b"})
    cfg = load_config(moved)
    zk.delete(ZkPaths(cfg.zookeeper.root, cfg.job.name).binding)  # as a job from before bindings were recorded
    result = run_etl(moved)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "was planned to write to etl_test." + hive_table_name in result.stderr
    assert run_etl(config).returncode == 0
    assert table_offsets(spark, DB, hive_table_name) == expected_offsets(topic, {0: 70, 1: 70})


def test_a_changed_warehouse_url_is_refused_and_bind_moves_the_job_on_purpose(
        spark, new_topic, produce, write_config, hive_table_name, tmp_path):
    topic, config = loaded(new_topic, produce, write_config)
    produce(topic, events_by_partition(2, 10, first_id=500))
    elsewhere = write_config(kafka={"topics": topic}, warehouse={"url": f"file://{tmp_path}/other-warehouse"})
    result = run_etl(elsewhere)
    assert result.returncode == 2 and "other-warehouse" in result.stderr, result.stderr[-2000:]
    assert committed(config) == {(topic, 0): 60, (topic, 1): 60}
    moved = write_config(kafka={"topics": topic}, hive={"table": f"{hive_table_name}_b"})
    bound = etl_command(moved, "bind", "--execute", timeout=240)
    assert bound.returncode == 0, bound.stdout + bound.stderr[-2000:]
    ran = run_etl(moved)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert table_offsets(spark, DB, f"{hive_table_name}_b") == expected_offsets(topic, {0: 70, 1: 70}, start=60)
    assert run_verify(load_config(moved), deep=True).ok


def test_a_backwards_reset_is_refused_inside_a_file_and_over_files_unless_moved_aside(
        spark, new_topic, produce, write_config, hive_table_name, warehouse_dir):
    topic, config = loaded(new_topic, produce, write_config, job={"max_records_per_partition": "20"})
    inside = etl_command(config, "reset-offsets", "--to", f"{topic}:0=30", "--execute", "--move-aside")
    assert inside.returncode == 2 and "reset to 20 or 40 instead" in inside.stderr, inside.describe()
    over = etl_command(config, "reset-offsets", "--to", f"{topic}:0=20", "--execute")
    assert over.returncode == 2 and "--move-aside" in over.stderr, over.describe()
    assert committed(config)[(topic, 0)] == 60
    done = etl_command(config, "reset-offsets", "--to", f"{topic}:0=20", "--execute", "--move-aside")
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert len(list((warehouse_dir / "_etl_moved_aside").rglob(f"*{DATA_SUFFIX}"))) == 2
    assert run_job(load_config(config)) == 0
    assert table_offsets(spark, DB, hive_table_name) == expected_offsets(topic, {0: 60, 1: 60})
    assert run_verify(load_config(config), deep=True).ok


def test_a_gap_that_a_forward_reset_partly_explains_is_rewritten_only_where_it_is_not(
        spark, new_topic, produce, write_config, hive_table_name, warehouse_dir):
    # Found by the campaign (seed 194747721): a partition's files deleted, then a forward reset
    # over one record. The gap [0, 61) was compared with the reset's jump [60, 61) as a whole, so
    # recover rewrote [0, 61) and loaded the record the operator had chosen to skip.
    topic, config = loaded(new_topic, produce, write_config)
    for f in table_files(warehouse_dir, hive_table_name, 0):
        f.unlink()
    produce(topic, events_by_partition(2, 10, first_id=1000))
    reset = etl_command(config, "reset-offsets", "--to", f"{topic}:0=61", "--execute")
    assert reset.returncode == 0, reset.stdout + reset.stderr[-2000:]
    report = run_verify(load_config(config), deep=False)
    assert kinds(report) == ["gap"] and "[0, 60)" in report.render(), report.render()
    assert recover(load_config(config), RecoverOptions(Act.EXECUTE), out=print) == 0
    assert run_job(load_config(config)) == 0
    assert table_offsets(spark, DB, hive_table_name) == (
        expected_offsets(topic, {0: 60, 1: 70}) + expected_offsets(topic, {0: 70}, start=61))
    assert run_verify(load_config(config), deep=True).ok


def test_a_reset_killed_after_moving_files_is_finished_by_the_next_run(
        spark, new_topic, produce, write_config, hive_table_name, warehouse_dir):
    topic, config = loaded(new_topic, produce, write_config, job={"max_records_per_partition": "20"})
    cfg = load_config(config)
    with ZkStateStore(cfg.zookeeper, cfg.job.name, cfg.retry) as store:  # what a reset records before moving files
        assert store.session.acquire_lock() is None
        victim = table_files(warehouse_dir, hive_table_name, 1)[-1]
        aside = warehouse_dir / "_etl_moved_aside" / "by-hand" / victim.name
        event = Reset("now", "test", (OffsetChange(topic, 1, 60, 40),), ((str(victim), str(aside)),))
        store.operator.write_pending_reset(PendingReset(event, {}))
        store.session.release_lock()
    assert run_job(cfg) == 0
    assert aside.exists()  # moved out, then [40, 60) loaded again (into the same name: same hour)
    assert committed(config)[(topic, 1)] == 60
    assert table_offsets(spark, DB, hive_table_name) == expected_offsets(topic, {0: 60, 1: 60})
    assert run_verify(cfg, deep=True).ok


def test_a_new_partition_of_a_known_topic_starts_at_earliest_whatever_starting_offsets_says(
        spark, new_topic, produce, write_config, hive_table_name, zk):
    topic = new_topic(partitions=2)
    produce(topic, {0: events_by_partition(1, 5)[0]})
    config = write_config(kafka={"topics": topic}, job={"starting_offsets": "latest"})
    cfg = load_config(config)
    assert run_job(cfg) == 0  # a topic new to the job: latest, for both partitions
    assert committed(config) == {(topic, 0): 5, (topic, 1): 0}
    # The broker here cannot add partitions: forget partition 1, as if it had just been created.
    rewrite_committed(config, lambda offsets, ids: offsets.pop((topic, 1)))
    produce(topic, events_by_partition(2, 10, first_id=100))
    assert run_job(cfg) == 0
    assert table_offsets(spark, DB, hive_table_name) == expected_offsets(topic, {0: 15}, start=5) \
        + expected_offsets(topic, {1: 10})
