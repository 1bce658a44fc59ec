"""`etl verify`, `etl recover` and `etl reset-offsets` on real services, against a tampered
warehouse: each kind of damage is found, named, and only the safe ones are repaired."""
from __future__ import annotations

import shutil

import pytest

from etl.config import load_config
from etl.errors import RefusedUntilDone
from etl.ops.run import run_job
from etl.model.batch import BatchState
from etl.ops.acting import Act
from etl.ops.recovery import RecoverOptions, recover
from etl.ops.reset import ResetOptions, parse_targets, reset_offsets
from etl.ops.verify import run_verify
from etl.state.store import ZkStateStore
from tests.harness.data import events_by_partition, loaded_job
from tests.harness.etl_process import etl_command, run_etl
from tests.harness.oracle import expected_offsets, table_offsets
from tests.harness.state import wait_for_lock_release

DB = "etl_test"


def kinds(report):
    return sorted({p.kind for p in report.problems})


def table_files(warehouse_dir, table):
    return sorted(p for p in (warehouse_dir / f"{DB}.db" / table).rglob("*.parquet"))


def test_a_healthy_job_verifies_deep(spark, new_topic, produce, write_config):
    _, config = loaded_job(new_topic, produce, write_config, job={"max_records_per_partition": "20"})
    report = run_verify(load_config(config), deep=True)
    assert report.ok, report.render()
    assert report.files == 6 and report.partitions == 2


def test_a_deleted_file_is_a_gap_and_deep_finds_its_records_still_in_kafka(
        spark, new_topic, produce, write_config, hive_table_name, warehouse_dir):
    _, config = loaded_job(new_topic, produce, write_config, job={"max_records_per_partition": "20"})
    middle = [f for f in table_files(warehouse_dir, hive_table_name) if "+0+00000000000000000020+" in f.name][0]
    middle.unlink()
    report = run_verify(load_config(config), deep=True)
    assert kinds(report) == ["gap", "missing_offset"]
    assert "[20, 40)" in report.render() and "run `etl recover`, which rewrites the range from Kafka" in report.render()
    assert etl_command(config, "verify").returncode == 1


def test_a_copied_file_is_an_overlap_a_duplicate_and_an_unregistered_partition(
        spark, new_topic, produce, write_config, hive_table_name, warehouse_dir):
    _, config = loaded_job(new_topic, produce, write_config)
    original = table_files(warehouse_dir, hive_table_name)[0]
    elsewhere = original.parent.parent.parent / "dt=2001-01-01" / "hour=00"
    elsewhere.mkdir(parents=True)
    shutil.copy(original, elsewhere / original.name)
    report = run_verify(load_config(config), deep=False)
    assert kinds(report) == ["overlap", "unregistered_partition"]
    spark.sql(f"ALTER TABLE {DB}.{hive_table_name} ADD PARTITION (dt='2001-01-01', hour='00') "
              f"LOCATION '{elsewhere}'")
    assert "duplicate_offset" in kinds(run_verify(load_config(config), deep=True))


def test_recover_deletes_temp_files_and_refuses_a_file_outside_every_plan(
        spark, new_topic, produce, write_config, hive_table_name, warehouse_dir):
    topic, config = loaded_job(new_topic, produce, write_config)
    some = table_files(warehouse_dir, hive_table_name)[0]
    (some.parent / f"_tmp.0123abcd.{some.name}").write_bytes(b"partial")
    assert kinds(run_verify(load_config(config), deep=False)) == ["temp_file"]
    lines = []
    assert recover(load_config(config), RecoverOptions(Act.EXECUTE), out=lines.append) == 0
    assert any("delete 1 temp files" in line for line in lines)
    assert run_verify(load_config(config), deep=False).ok

    stray = some.parent / f"{topic}+0+{50:020d}+{60:020d}.parquet"
    shutil.copy(some, stray)
    lines.clear()
    assert recover(load_config(config), RecoverOptions(Act.EXECUTE), out=lines.append) == 1
    text = "\n".join(lines)
    assert "uncovered_file" in text and "belongs to no open batch plan" in text and "nothing was changed" in text
    assert stray.exists()


def test_recover_explains_a_crashed_batch_then_completes_it(
        spark, zk, new_topic, produce, write_config, hive_table_name):
    topic = new_topic(partitions=3)
    produce(topic, events_by_partition(3, 40))
    config = write_config(kafka={"topics": topic}, zookeeper={"session_timeout_seconds": "4"})
    assert run_etl(config, fault="state:WRITTEN").returncode == -9
    wait_for_lock_release(zk, config)

    dry = etl_command(config, "recover")
    assert dry.returncode == 0, dry.stderr
    assert "batch 1 is open in state WRITTEN: all its files are written, but its Hive partition was not" \
           " registered" in dry.stdout
    assert "register Hive partition" in dry.stdout and "commit the offsets of batch 1" in dry.stdout
    assert dry.stdout.splitlines()[-1] == "preview: nothing changed; pass --execute to apply", dry.stdout
    cfg = load_config(config)
    with ZkStateStore(cfg.zookeeper, cfg.job.name, cfg.retry) as store:
        assert store.batches.open_batch()[0].state is BatchState.WRITTEN  # the preview changed nothing

    done = etl_command(config, "recover", "--execute", timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "batch 1 (resumed) COMMITTED" in done.stdout
    assert table_offsets(spark, DB, hive_table_name) == expected_offsets(topic, {0: 40, 1: 40, 2: 40})
    assert etl_command(config, "verify", "--deep", timeout=240).returncode == 0


def test_reset_offsets_is_refused_while_locked_or_open_and_recorded_when_applied(
        spark, new_topic, produce, write_config):
    topic, config = loaded_job(new_topic, produce, write_config)
    cfg = load_config(config)
    out = []
    with ZkStateStore(cfg.zookeeper, cfg.job.name, cfg.retry) as other:
        other.session.acquire_lock()
        with pytest.raises(RefusedUntilDone, match="a run holds the job lock") as refused:
            reset_offsets(cfg, ResetOptions("latest", Act.EXECUTE), out=out.append)
        assert refused.value.exit_code == 1

    produce(topic, events_by_partition(2, 10, first_id=900))
    out.clear()
    to_55 = parse_targets([f"{topic}:0=55"])
    assert reset_offsets(cfg, ResetOptions(to_55), out=out.append) == 0
    assert out == [f"{topic}[0]: 50 -> 55", "preview: nothing changed; pass --execute to apply"]
    assert reset_offsets(cfg, ResetOptions(to_55, Act.EXECUTE), out=out.append) == 0
    status = etl_command(config, "status")
    assert "offsets reset at" in status.stdout and f"{topic}[0] 50 -> 55" in status.stdout
    assert run_job(cfg) == 0
    assert run_verify(cfg, deep=False).ok  # the recorded reset explains the gap [50, 55)
    offsets = table_offsets(spark, DB, cfg.hive.table)
    assert (topic, 0, 52) not in offsets and (topic, 0, 55) in offsets and (topic, 1, 52) in offsets
