"""`etl compact` for a job with routes, on the real services: each table its topics were loaded
into, and the job's rejected table once; `--table`; `[compaction] after_run`; `reset-offsets
--move-aside` over merged files; a SIGKILL at each step of a routed table's compaction carried on
in turn by `etl recover`, `etl compact` and `etl run`, Hive read after every step. One job: a fixed
table (two Kafka partitions), a `{topic}` table, and a topic split by `action` between two tables;
every sixth record is garbled, so the rejected table has files of every topic. Every command is an
`etl` process (Spark's start, about 8 s each), so each test reuses its one loaded job. Without
Spark, every one of the six steps is interrupted per table in tests/unit/test_compaction_tables.py.
"""
from __future__ import annotations

import json
import re
import shutil
import uuid
from collections import Counter
from pathlib import Path

import pytest

from etl.config import load_config
from etl.config.routes import table_name
from etl.model.compaction import COMPACTED_FOLDER
from tests.harness.campaign import zone_whose_hour_lasts
from tests.harness.etl_process import etl_command, run_etl
from tests.harness.oracle import check_exactly_once, hive_reader, job_tables
from tests.harness.paths import EVENTS_SCHEMA
from tests.harness.state import wait_for_lock_release
from tests.harness.warehouse_files import DATA_SUFFIX
from tests.integration.test_compaction import KILL_POINTS, committed_offsets, pending_compactions

DB = "etl_test"
CAMPAIGN_SECONDS = 300  # 95 s serially, 3 times that on a loaded two-worker suite; every round in one hour
BATCH = 6  # max_records_per_partition: 12 records a partition make two files in each table


class RoutedJob:
    """The topics, the tables and what was produced (each garbled record is expected in the rejected table)."""

    def __init__(self, name: str, new_topic, produce, write_config, timezone: str = "UTC", **compaction):
        self.name, self.produce = name, produce
        self.a, self.own, self.split = new_topic(2, f"{name}.a"), new_topic(1, f"{name}.own"), \
            new_topic(1, f"{name}.split")
        self.partitions = {self.a: 2, self.own: 1, self.split: 1}
        self.ends: Counter = Counter()
        route = {"schema": str(EVENTS_SCHEMA)}
        self.sections = dict(
            kafka={"topics": None}, zookeeper={"session_timeout_seconds": "4"},
            job={"max_records_per_partition": str(BATCH)},
            hive={"table": None, "schema": None, "rejected_table": f"{name}_rejected", "partition_timezone": timezone},
            compaction={"min_files": "2", "keep_superseded_minutes": "0", "only_finished": "false", **compaction},
            **{"route a": {**route, "topics": self.a, "table": f"{name}_a"},
               # a routed table's rollup, through compaction, late rows and the other tables' resets
               "rollup a_by_action": {"route": "a", "table": f"{name}_a_by_action", "group_by": "action",
                                      "aggregates": "count(*) as n, sum(event_id) as ids, min(event_id) as first, "
                                                    "count(user_id) as users"},
               "route own": {**route, "topics": self.own, "table": "{topic}"},
               "route clicks": {**route, "topics": self.split, "field": "action", "values": "click",
                                "table": f"{name}_clicks"},
               "route rest": {**route, "topics": self.split, "field": "action", "values": "*",
                              "table": f"{name}_rest"}})
        self.config = write_config(**self.sections)
        self.write_config = write_config
        self.tables = [f"{name}_a", table_name("{topic}", self.own), f"{name}_clicks", f"{name}_rest"]
        self.rejected = f"{name}_rejected"

    def more(self, per_partition: int = 2 * BATCH) -> None:
        for topic, count in self.partitions.items():
            self.produce(topic, {p: [_record(self.ends[(topic, p)] + i) for i in range(per_partition)]
                                 for p in range(count)})
            for p in range(count):
                self.ends[(topic, p)] += per_partition

    @property
    def expected(self) -> Counter:
        return Counter({(t, p, o): 1 for (t, p), end in self.ends.items() for o in range(end)})

    def with_compaction(self, **compaction) -> Path:
        sections = dict(self.sections)
        sections["compaction"] = {**sections["compaction"], **compaction}
        return self.write_config(**sections)


def _record(i: int) -> bytes:
    if i % BATCH == 3:
        return b'{"event_id": garbled'  # not JSON: a row of the rejected table
    return json.dumps({"event_id": i, "action": "click" if i % 3 == 0 else "view",
                       "ts": "2026-11-21 10:00:00"}).encode()


def _loaded(new_topic, produce, write_config, timezone: str = "UTC", **compaction) -> RoutedJob:
    job = RoutedJob(f"cr{uuid.uuid4().hex[:8]}", new_topic, produce, write_config, timezone, **compaction)
    job.more()
    first = run_etl(job.config)
    assert first.returncode == 0 and first.stdout.count("COMMITTED") == 2, first.describe()
    return job


def _check_rollup(spark, job: RoutedJob) -> None:
    """Route a's rollup (docs/rollups.md) equals a recount of its table, value for value."""
    table, view = job.tables[0], f"{job.name}_a_by_action"
    spark.sql(f"REFRESH TABLE {DB}.{view}_partials")
    spark.sql(f"REFRESH TABLE {DB}.{table}")
    recount = {tuple(row) for row in spark.sql(f"SELECT action, count(*), sum(event_id), min(event_id), count(user_id) "
                                               f"FROM {DB}.{table} GROUP BY action").collect()}
    rolled = {tuple(row) for row in spark.sql(f"SELECT * FROM {DB}.{view}").collect()}
    assert len(recount) == 2 and rolled == recount, (sorted(recount), sorted(rolled))


def _root(warehouse_dir: Path, table: str) -> Path:
    return warehouse_dir / f"{DB}.db" / table


def _compacted(report: dict) -> list[str]:
    return [plan.get("table_name") or plan["table"] for plan in report["compacted"]]


@pytest.mark.slow
def test_every_table_and_the_rejected_table_are_compacted_once_and_every_command_follows(
        spark, new_topic, produce, write_config, warehouse_dir):
    job = _loaded(new_topic, produce, write_config)
    a, own, clicks, rest = job.tables

    dry = etl_command(job.config, "compact", "--json")
    assert dry.returncode == 0, dry.describe()
    assert sorted(_compacted(json.loads(dry.stdout))) == sorted([*job.tables, "rejected"]), dry.stdout
    assert not any((_root(warehouse_dir, t) / COMPACTED_FOLDER).exists() for t in [*job.tables, job.rejected])

    only_a = etl_command(job.config, "compact", "--execute", "--table", a.upper(), "--json")
    assert only_a.returncode == 0 and _compacted(json.loads(only_a.stdout)) == [a], only_a.describe()
    rest_of = etl_command(job.config, "compact", "--execute", "--json")
    assert rest_of.returncode == 0, rest_of.describe()
    assert _compacted(json.loads(rest_of.stdout)) == [clicks, own, rest, "rejected"], rest_of.stdout  # rejected once
    unknown = etl_command(job.config, "compact", "--execute", "--table", "nope")
    assert unknown.returncode == 2 and f"whose tables are {a}" in unknown.stderr, unknown.describe()

    status = etl_command(job.config, "status", "--json")
    assert status.returncode == 0, status.describe()
    compacted = json.loads(status.stdout)["compacted_partitions"]
    assert compacted["main"] == 0 and compacted["rejected"] == 1, compacted
    partials = f"{job.name}_a_by_action_partials"  # route a's rollup's, folded with its table's files
    assert compacted["tables"] == {**{t: 1 for t in job.tables}, partials: 1}, compacted
    assert list((_root(warehouse_dir, partials) / COMPACTED_FOLDER).rglob("*.parquet")), "no partial was folded"

    job.more(BATCH)  # late rows for the compacted hour go into each table's compacted folder
    late = run_etl(job.config)
    assert late.returncode == 0, late.describe()
    for table in [*job.tables, job.rejected]:
        root = _root(warehouse_dir, table)
        outside = [p for p in root.glob(f"dt=*/hour=*/*{DATA_SUFFIX if table != job.rejected else '.parquet'}")]
        assert outside == [] or len({p.parent for p in outside}) == 1, outside  # or the hour turned meanwhile
    oracle = check_exactly_once(hive_reader(spark), job.config, job.expected, warehouse_dir)  # verify --deep too
    _check_rollup(spark, job)
    print(f"[compaction-routed] every table once: {oracle.describe()}")

    [merged] = sorted((_root(warehouse_dir, a) / COMPACTED_FOLDER).rglob(f"{job.a}+0+*{DATA_SUFFIX}"))[:1]
    partition = merged.relative_to(_root(warehouse_dir, a) / COMPACTED_FOLDER).parent.parent
    stray = _root(warehouse_dir, a) / partition / merged.name
    stray.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(merged, stray)
    verify = etl_command(job.config, "verify", "--json")
    assert verify.returncode == 1, verify.describe()
    problems = json.loads(verify.stdout)["problems"]
    assert [p["kind"] for p in problems] == ["superseded_file"] and stray.name in problems[0]["detail"], problems
    stray.unlink()

    # reset-offsets --move-aside over a routed table's merged file (and the rejected table's): each
    # moved, and said, once; the reload lands where Hive reads, once.
    reset = etl_command(job.config, "reset-offsets", "--to", f"{job.own}:0=0", "--move-aside", "--execute")
    assert reset.returncode == 0, reset.describe()
    moves = re.findall(r"move out of the table: (\S+) ->", reset.stdout)
    merged_own = [m for m in moves if f"{job.own}+0+{0:020d}+{2 * BATCH:020d}" in m]
    assert len(merged_own) == 2 and len(set(moves)) == len(moves), reset.stdout  # its table's and the rejected one
    assert run_etl(job.config).returncode == 0
    reloaded = check_exactly_once(hive_reader(spark), job.config, job.expected, warehouse_dir)
    _check_rollup(spark, job)
    print(f"[compaction-routed] moved aside over merged files, reloaded: {reloaded.describe()}")


@pytest.mark.slow
def test_sigkill_at_every_step_of_a_routed_compaction_is_carried_on_exactly_once(
        zk, spark, new_topic, produce, write_config, warehouse_dir):
    """Rounds alternate table a (`--table a --partition P`) with the rejected table; each killed
    compaction is carried on in turn by `etl recover`, `etl compact` and `etl run`. Then
    [compaction] after_run compacts the routed job at the end of `etl run`."""
    job = _loaded(new_topic, produce, write_config, timezone=zone_whose_hour_lasts(CAMPAIGN_SECONDS))
    read = hive_reader(spark)
    # recover first: it finishes a compaction short of SWITCHED, and leaves a SWITCHED one for the
    # next run or compact to delete its replaced files (nothing to repair), as for one table.
    carry_on = [("recover", lambda: etl_command(job.config, "recover", "--execute")),
                ("run", lambda: run_etl(job.config)),
                ("compact", lambda: etl_command(job.config, "compact", "--execute"))]
    for index, point in enumerate(KILL_POINTS):
        table = job.tables[0] if index % 2 == 0 else job.rejected
        newest = max(p.relative_to(_root(warehouse_dir, table))
                     for p in _root(warehouse_dir, table).glob("dt=*/hour=*"))
        killed = run_etl(job.config, "--execute", "--table", table, "--partition", str(newest), command="compact",
                         fault=point)
        assert killed.returncode != 0, f"{point}: {killed.describe()}"
        wait_for_lock_release(zk, job.config)
        _assert_once(read, job, point)
        by, carry = carry_on[index % 3]
        done = carry()
        assert done.returncode == 0, f"{point}, carried on by {by}: {done.describe()}"
        left = [plan.state.value for plan, _ in pending_compactions(job.config)]
        assert left == [] or by == "recover" and left == ["SWITCHED"], (point, left)  # keep_superseded_minutes = 0
        _assert_once(read, job, f"{point}, carried on")
        job.more()  # two more files a partition: the next round has something to compact
        assert run_etl(job.config).returncode == 0
    after_run = job.with_compaction(after_run="true")
    job.more()
    compacted = run_etl(after_run)
    assert compacted.returncode == 0 and "etl: compacted " in compacted.stdout, compacted.describe()
    assert pending_compactions(job.config) == []
    oracle = check_exactly_once(read, job.config, job.expected, warehouse_dir)
    print(f"[compaction-routed] SIGKILL at {', '.join(KILL_POINTS)}, then after_run: {oracle.describe()}")


def _assert_once(read, job: RoutedJob, when: str) -> None:
    cfg = load_config(job.config)
    tables = job_tables(cfg, job.partitions)
    seen: Counter = Counter()
    for table in (*tables.tables, tables.rejected):
        seen.update(read(DB, table))
    twice = [k for k, n in seen.items() if n > 1]
    assert not twice, f"after {when}: offsets twice in Hive: {twice[:5]}"
    committed = committed_offsets(job.config)
    missing = [(t, p, o) for (t, p), end in committed.items() for o in range(end) if (t, p, o) not in seen]
    assert not missing, f"after {when}: committed offsets missing from Hive: {missing[:5]}"
