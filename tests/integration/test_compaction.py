"""`etl compact` on the real services: small files merged exactly once, while analysts query.

Each test loads a topic in several small batches (max_records_per_partition), so that one Hive
partition holds many files, then compacts it and checks, through Hive, that every produced
offset is in the table once, and `etl verify --deep` agrees.
"""
from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pyarrow.orc as orc
import pyarrow.parquet as pq

from etl.config import load_config
from etl.context.job import JobContext
from etl.model.batch import utc_now
from etl.model.compaction import COMPACTED_FOLDER
from etl.ops.acting import Act
from etl.ops.compact import CompactOptions, run_compact
from etl.ops.recovery import RecoverOptions, recover, recover_in
from etl.ops.run import run_job
from etl.ops.verify import run_verify
from etl.sink.checksums import CHECKSUMS_KEY
from etl.state.store import ZkStateStore
from tests.harness.campaign import zone_whose_hour_lasts
from tests.harness.etl_process import etl_command, run_etl
from tests.harness.state import wait_for_lock_release
from tests.harness.warehouse_files import DATA_SUFFIX
from tests.harness.oracle import check_exactly_once, expected_offsets, hive_reader, table_offsets

DB = "etl_test"
RECORDS = {0: 30, 1: 24}  # 6 records a batch: 5 and 4 files per Kafka partition


def records(count: int, start: int = 0) -> list[bytes]:
    return [json.dumps({"event_id": i, "ts": "2026-11-20 10:15:00"}).encode() for i in range(start, start + count)]


def compaction_config(write_config, topic: str, timezone: str = "UTC", **compaction):
    # ZooKeeper's shortest session (as the crash tests): a SIGKILLed command's lock goes in 4 s, not 10
    return write_config(kafka={"topics": topic}, job={"max_records_per_partition": "6"},
                        zookeeper={"session_timeout_seconds": "4"}, hive={"partition_timezone": timezone},
                        compaction={"min_files": "2", "keep_superseded_minutes": "0", **compaction})


def loaded(new_topic, produce, write_config, timezone: str = "UTC", **compaction):
    topic = new_topic(partitions=2)
    produce(topic, {p: records(n) for p, n in RECORDS.items()})
    config = compaction_config(write_config, topic, timezone, **compaction)
    finished = run_etl(config)
    assert finished.returncode == 0, finished.describe()
    return topic, config


def partitions_of(warehouse_dir: Path, table: str) -> list[str]:
    root = warehouse_dir / f"{DB}.db" / table
    return sorted(str(p.relative_to(root)) for p in root.glob("dt=*/hour=*"))


def parquet_files(folder: Path, suffix: str = DATA_SUFFIX) -> list[Path]:
    """The table's data files (`suffix`: a rejected table's are .parquet whatever the format)."""
    return sorted(p for p in folder.rglob(f"*{suffix}") if not p.name.startswith("_"))


def test_compacting_a_partition_keeps_every_offset_once(spark, new_topic, produce, write_config, hive_table_name,
                                                        warehouse_dir):
    topic, config = loaded(new_topic, produce, write_config)
    [partition] = partitions_of(warehouse_dir, hive_table_name)
    root = warehouse_dir / f"{DB}.db" / hive_table_name
    assert len(parquet_files(root)) == 9

    dry = etl_command(config, "compact", "--partition", partition, "--json")
    assert dry.returncode == 0, dry.describe()
    assert [c["partition"] for c in json.loads(dry.stdout)["compacted"]] == [partition]
    assert len(parquet_files(root)) == 9 and not (root / COMPACTED_FOLDER).exists()  # a preview changes nothing

    done = etl_command(config, "compact", "--execute", "--partition", partition)
    assert done.returncode == 0, done.describe()
    merged = parquet_files(root)
    assert [p.name for p in merged] == [f"{topic}+0+{0:020d}+{30:020d}{DATA_SUFFIX}",
                                        f"{topic}+1+{0:020d}+{24:020d}{DATA_SUFFIX}"], merged
    assert all(COMPACTED_FOLDER in str(p) for p in merged)
    check_exactly_once(hive_reader(spark), config, expected_offsets(topic, RECORDS), warehouse_dir)


def test_below_min_files_is_left_alone_and_an_open_batch_is_refused(zk, new_topic, produce, write_config,
                                                                   hive_table_name, warehouse_dir):
    topic, config = loaded(new_topic, produce, write_config, min_files="20")
    [partition] = partitions_of(warehouse_dir, hive_table_name)
    left = etl_command(config, "compact", "--execute", "--partition", partition, "--json")
    assert left.returncode == 0, left.describe()
    report = json.loads(left.stdout)
    assert report["compacted"] == [] and "fewer than min_files = 20" in report["looked_at"][0]["skipped"]

    produce(topic, {0: records(3, 30)})
    killed = run_etl(config, fault="state:WRITTEN")  # SIGKILL: batch left open
    assert killed.returncode != 0
    wait_for_lock_release(zk, config)
    refused = etl_command(config, "compact", "--execute", "--partition", partition)
    assert refused.returncode == 1 and "is open in state WRITTEN" in refused.stderr, refused.describe()
    root = warehouse_dir / f"{DB}.db" / hive_table_name
    assert not (root / COMPACTED_FOLDER).exists()


ALL_KILL_POINTS = ("compact:PLANNED", "compact:merged:0", "compact:WRITTEN", "compact:metastore-switched",
                   "compact:SWITCHED", "compact:DELETED")
# About 45 s a point: by default the two that leave the most half done (the metastore switched but
# not ZooKeeper; replaced files half deleted). Some merged files published (merged:0) is
# test_orc_tables.py's kill, on an ORC table; every step of a table's compaction is interrupted
# and carried on without Spark in tests/unit/test_compaction_tables.py.
# ETL_COMPACTION_KILL_POINTS=all runs every step (measured: 6 min, all passed).
KILL_POINTS = ALL_KILL_POINTS if os.environ.get("ETL_COMPACTION_KILL_POINTS") == "all" else \
    ("compact:metastore-switched", "compact:DELETED")


def test_sigkill_at_every_step_of_a_compaction_is_carried_on_exactly_once(
        zk, spark, new_topic, produce, write_config, hive_table_name, warehouse_dir):
    """Each round: more records loaded into the partition (by then compacted: the new files go to
    its current folder), a compaction SIGKILLed at one step, then carried on by the next `etl run`
    or `etl compact`. Hive is read after every step: never an offset twice, never one missing."""
    # about 60 s serially: every round's files in the one partition
    topic, config = loaded(new_topic, produce, write_config, timezone=zone_whose_hour_lasts(240))
    [partition] = partitions_of(warehouse_dir, hive_table_name)
    produced = dict(RECORDS)
    read = hive_reader(spark)
    for index, point in enumerate(KILL_POINTS):
        killed = run_etl(config, "--execute", "--partition", partition, command="compact", fault=point)
        assert killed.returncode != 0, f"{point}: {killed.describe()}"
        wait_for_lock_release(zk, config)
        assert_once(read, config, topic, produced, point)
        produce(topic, {0: records(7, produced[0])})
        produced[0] += 7
        finished = run_etl(config) if index % 2 == 0 else etl_command(config, "compact", "--execute")
        assert finished.returncode == 0, f"{point}: {finished.describe()}"
        if index % 2:
            assert run_etl(config).returncode == 0
        assert_once(read, config, topic, produced, point)
    final = etl_command(config, "compact", "--execute", "--partition", partition)
    assert final.returncode == 0, final.describe()
    assert pending_compactions(config) == []
    check_exactly_once(read, config, expected_offsets(topic, produced), warehouse_dir)


def assert_once(read, config, topic: str, produced: dict, point: str) -> None:
    cfg = load_config(config)
    seen = read(DB, cfg.hive.table) + read(DB, f"{cfg.hive.table}_rejected")
    twice = [k for k, n in seen.items() if n > 1]
    assert not twice, f"after {point}: offsets twice in Hive: {twice[:5]}"
    committed = committed_offsets(config)
    missing = [(topic, p, o) for p in produced for o in range(committed.get((topic, p), 0))
               if (topic, p, o) not in seen]
    assert not missing, f"after {point}: committed offsets missing from Hive: {missing[:5]}"


def committed_offsets(config) -> dict:
    cfg = load_config(config)
    with ZkStateStore(cfg.zookeeper, cfg.job.name, cfg.retry) as store:
        return {key: c.value for key, c in store.offsets.committed_offsets().items()}


def pending_compactions(config) -> list:
    cfg = load_config(config)
    with ZkStateStore(cfg.zookeeper, cfg.job.name, cfg.retry) as store:
        return store.compactions.open_compactions()


def test_late_rows_for_a_compacted_partition_are_visible_through_hive_once(
        spark, new_topic, produce, write_config, hive_table_name, warehouse_dir):
    """By event time: hour 10 is compacted, then a late 10:40 row arrives. Its file goes to the
    partition's current (compacted) folder, so Hive shows it."""
    topic = new_topic(partitions=2)
    produce(topic, {p: records(n) for p, n in RECORDS.items()})
    config = write_config(kafka={"topics": topic}, job={"max_records_per_partition": "6"},
                          hive={"partition_by": "column:ts"},
                          compaction={"min_files": "2", "keep_superseded_minutes": "0"})
    assert run_etl(config).returncode == 0
    partition = "dt=2026-11-20/hour=10"
    done = etl_command(config, "compact", "--execute", "--json")  # finished: its window closed days ago
    assert done.returncode == 0, done.describe()
    assert [c["partition"] for c in json.loads(done.stdout)["compacted"]] == [partition]

    late = json.dumps({"event_id": 99, "ts": "2026-11-20 10:40:00"}).encode()
    produce(topic, {1: [late]})
    assert run_etl(config).returncode == 0
    root = warehouse_dir / f"{DB}.db" / hive_table_name
    late_file = root / COMPACTED_FOLDER / partition / "c0000000001" / f"{topic}+1+{24:020d}+{25:020d}{DATA_SUFFIX}"
    assert late_file.exists(), sorted(str(p) for p in parquet_files(root))
    shown = table_offsets(spark, DB, hive_table_name)
    assert shown[(topic, 1, 24)] == 1
    check_exactly_once(hive_reader(spark), config, expected_offsets(topic, {0: 30, 1: 25}), warehouse_dir)

    # Compacting it again merges compaction 1's files, which its record in ZooKeeper says carry
    # checksums: one rewritten without `etl.checksums` is refused, not merged and so vouched for.
    merged = late_file.parent / f"{topic}+0+{0:020d}+{30:020d}{DATA_SUFFIX}"
    if DATA_SUFFIX == ".orc":  # rewritten by pyarrow's ORC writer, which writes no footer metadata at all
        orc.write_table(orc.read_table(str(merged)), str(merged))
    else:
        table = pq.read_table(merged, coerce_int96_timestamp_unit="us")
        footer = {k: v for k, v in pq.ParquetFile(merged).metadata.metadata.items()
                  if k.startswith(b"etl.") and k != CHECKSUMS_KEY}
        pq.write_table(table.replace_schema_metadata(footer), merged, use_deprecated_int96_timestamps=True)
    again = etl_command(config, "compact", "--execute", "--partition", partition)
    assert again.returncode == 1 and f"{merged.name} has no `etl.checksums`" in again.stderr, again.describe()
    assert not (root / COMPACTED_FOLDER / partition / "c0000000002").exists() or \
        not any((root / COMPACTED_FOLDER / partition / "c0000000002").iterdir())  # rolled back


def test_a_file_lost_beside_a_merged_rejected_file_is_recovered_with_every_rejected_record(
        spark, new_topic, produce, write_config, hive_table_name, warehouse_dir):
    """Six batches of 10 records, every 7th not JSON, so each range has a rejected file; only the
    rejected table's hour is compacted (one merged file holds all six ranges), then one main file
    is lost. `etl verify` names the gap; `etl recover` moves the merged file out and so rewrites
    every range it holds, their main files moved too: no rejected record leaves the tables. It
    runs an hour later, and puts every range back into the hour it came from."""
    topic = new_topic(partitions=1)
    produce(topic, {0: bad_every_7th(60)})
    config = write_config(kafka={"topics": topic}, job={"max_records_per_partition": "10", "max_rejected_ratio": "0.5"},
                          compaction={"min_files": "2", "keep_superseded_minutes": "0"})
    cfg = load_config(config)
    assert run_job(cfg) == 0
    [partition] = partitions_of(warehouse_dir, hive_table_name)
    said: list[str] = []
    assert run_compact(cfg, CompactOptions((partition,), (cfg.hive.rejected_table,), Act.EXECUTE), out=said.append) == 0
    rejected = parquet_files(warehouse_dir / f"{DB}.db" / cfg.hive.rejected_table, ".parquet")
    assert [p.name for p in rejected] == [f"{topic}+0+{0:020d}+{60:020d}.parquet"], said
    lost = warehouse_dir / f"{DB}.db" / hive_table_name / partition / f"{topic}+0+{20:020d}+{30:020d}{DATA_SUFFIX}"
    lost.unlink()

    found = run_verify(cfg, deep=False)  # the merged file's range [20, 30) has no main file left either
    assert [p.kind for p in found.problems] == ["gap", "orphan_rejected_file"], found.render()
    assert recover(cfg, RecoverOptions(), out=said.append) == 0
    with JobContext(cfg, clock=lambda: utc_now() + dt.timedelta(hours=1)) as an_hour_later:
        assert recover_in(an_hour_later, RecoverOptions(Act.EXECUTE), out=said.append) == 0, said
    check_exactly_once(hive_reader(spark), config, expected_offsets(topic, {0: 60}), warehouse_dir)
    assert any("rewrite every range of the 1 merged files" in line for line in said), said
    for table in (hive_table_name, cfg.hive.rejected_table):  # no row went to the repair's own hour
        assert set(partitions_of(warehouse_dir, table)) <= {partition}, said
    assert [p.name for p in parquet_files(warehouse_dir / f"{DB}.db" / hive_table_name / partition)] == \
        [f"{topic}+0+{lo:020d}+{lo + 10:020d}{DATA_SUFFIX}" for lo in range(0, 60, 10)]


def bad_every_7th(count: int) -> list[bytes]:
    return [b"not json" if i % 7 == 0 else records(1, i)[0] for i in range(count)]
