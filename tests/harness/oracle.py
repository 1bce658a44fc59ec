"""The exactly-once oracle, and the invariants that must hold at any moment.

After a fault has been recovered from (`check_exactly_once`):
  * the Hive table plus `<table>_rejected`, read back through Hive, hold every produced
    (topic, partition, offset) exactly once; a routed job's tables (`[route]` sections) plus its
    rejected table likewise, and each record in its own topic's table;
  * the final files on disk tile each partition's offsets [0, end) with no gap and no overlap,
    and each file (plus its rejected twin) holds exactly end - start rows;
  * ZooKeeper: no open batch, committed offsets == the produced end offsets;
  * no `_tmp.` file anywhere under the warehouse dir;
  * `etl verify --deep`'s check finds nothing (`deep_verification`: in this process when it has a
    SparkSession, else the command).
"""
from __future__ import annotations

import collections
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from tests.harness.recovery import verify_deep
from tests.harness.state import JobState, job_state
from tests.harness.warehouse_files import file_problems, final_files, misplaced_rows, table_root, temp_files


def table_offsets(spark, database: str, table: str) -> Counter:
    """How many times each (topic, partition, offset) is in the Hive table, read through Hive."""
    spark.sql(f"REFRESH TABLE `{database}`.`{table}`")
    rows = spark.sql(f"SELECT kafka_topic, kafka_partition, kafka_offset FROM `{database}`.`{table}`").collect()
    return Counter((r[0], r[1], r[2]) for r in rows)


def expected_offsets(topic: str, counts: dict[int, int], start: int = 0) -> Counter:
    return Counter({(topic, p, o): 1 for p, n in counts.items() for o in range(start, n)})


def hive_reader(spark) -> Callable[[str, str], Counter]:
    return lambda database, table: table_offsets(spark, database, table)


def ends_of(expected: Counter) -> dict:
    ends = collections.defaultdict(int)
    for topic, partition, offset in expected:
        ends[(topic, partition)] = max(ends[(topic, partition)], offset + 1)
    return dict(ends)


@dataclass(frozen=True)
class JobTables:
    """Where a job's rows are read from: each topic's table, and the rejected table."""
    tables: tuple[str, ...]
    rejected: str
    by_topic: dict[str, tuple[str, ...]] = field(default_factory=dict)  # a routed job's; {}: all in tables[0]
    # A moved topic's earlier tables (`etl bind --move-loaded`), which hold its records loaded before the move.
    earlier: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def split_topics(self) -> frozenset[str]:
        """The topics several tables share, split by a field: a range has a file in each of them."""
        return frozenset(topic for topic, tables in self.by_topic.items() if len(tables) > 1)

    def read(self, read_table: Callable[[str, str], Counter], db: str) -> tuple[Counter, Counter, list[str]]:
        """The main tables' offsets as one, the rejected table's, and every record found in
        another table than its topic's."""
        main, problems = Counter(), []
        for table in self.tables:
            found = read_table(db, table)
            strays = sorted(k for k in found if table not in (*self.by_topic.get(k[0], (table,)),
                                                              *self.earlier.get(k[0], ())))
            if strays:
                problems.append(f"{len(strays)} offsets in table {table}, whose topics go to other tables, e.g. "
                                f"{strays[:3]}")
            main.update(found)
        return main, read_table(db, self.rejected), problems


def job_tables(cfg, topics, bound=None) -> JobTables:
    """The tables of the job `cfg` (etl.config.Config) for the produced `topics`; `bound`: its
    binding (JobState.binding), whose retired routes give a moved topic's earlier tables, as
    etl.ops.job_tables reads them."""
    if cfg.routes.implicit:
        return JobTables((cfg.hive.table,), cfg.hive.rejected_table)
    from etl.model.route_binding import RouteBinding
    from etl.model.routes import route_topics
    topics = sorted(set(topics))
    routed = route_topics(cfg.routes, topics, topics, cfg.hive.rejected_table).topics
    by_topic = {topic: tables.tables for topic, tables in routed.items()}
    earlier = {topic: tuple(sorted(bound.retired_tables([topic], by_topic) - set(by_topic.get(topic, ()))))
               for topic in topics} if isinstance(bound, RouteBinding) else {}
    earlier = {topic: names for topic, names in earlier.items() if names}
    names = {t for tables in (*by_topic.values(), *earlier.values()) for t in tables}
    return JobTables(tuple(sorted(names)), cfg.hive.rejected_table, by_topic, earlier)


@dataclass
class OracleReport:
    rows: int
    rejected: int
    files: int
    verify: str  # "etl verify --deep: exit 0", or "not available"

    def describe(self) -> str:
        return (f"exactly once: {self.rows} rows + {self.rejected} rejected, {self.files} files, "
                f"no temp files, ZooKeeper consistent, {self.verify}")


def check_exactly_once(read_table: Callable[[str, str], Counter], config: Path | str, expected: Counter,
                       warehouse_dir: Path | str, run_verify: bool = True) -> OracleReport:
    """The full oracle after a fault was recovered from. Raises AssertionError naming every
    problem found; returns a short report when all holds."""
    from etl.config import load_config
    from etl.job.write_mode import EVENT_TIME, configured_mode
    cfg = load_config(config)
    db, table = cfg.hive.database, cfg.hive.table
    state = job_state(config)
    tables = job_tables(cfg, {topic for topic, _p, _o in expected}, state.binding)
    main, rejected, problems = tables.read(read_table, db)
    both = main + rejected
    duplicates = {k: v for k, v in both.items() if v > 1}
    if duplicates:
        problems.append(f"{len(duplicates)} offsets more than once in Hive, e.g. {sorted(duplicates.items())[:5]}")
    missing = sorted(set(expected) - set(both))
    if missing:
        problems.append(f"{len(missing)} produced offsets missing from Hive, e.g. {missing[:5]}")
    unexpected = sorted(set(both) - set(expected))
    if unexpected:
        problems.append(f"{len(unexpected)} offsets in Hive that were never produced, e.g. {unexpected[:5]}")
    temps = temp_files(warehouse_dir)
    if temps:
        problems.append(f"{len(temps)} temp files left, e.g. {[str(t) for t in temps[:3]]}")
    ends = ends_of(expected)
    problems += file_problems(warehouse_dir, db, table, ends=ends, tables=tables.tables, rejected_table=tables.rejected,
                              split_topics=tables.split_topics)
    placing = cfg.hive.partitioning
    if configured_mode(placing) is EVENT_TIME:  # every row in the partition of its own event time
        for name in tables.tables:  # a routed job's: each of its tables
            problems += misplaced_rows(table_root(warehouse_dir, db, name), placing.event_column, placing.timezone)[:10]
    if state.open_state:
        problems.append(f"batch {state.last_batch_id} is still open ({state.last_state})")
    if state.committed != ends:
        problems.append(f"ZooKeeper committed offsets {sorted(state.committed.items())} != produced ends "
                        f"{sorted(ends.items())}")
    verified = "etl verify --deep: not run"
    if run_verify and not problems:
        verified, found = deep_verification(cfg, config)  # a routed job's: every table and the rejected one
        problems += found
    if problems:
        raise AssertionError("exactly-once oracle failed:\n  " + "\n  ".join(problems))
    files = sum(len(final_files(table_root(warehouse_dir, db, name))) for name in tables.tables)
    return OracleReport(sum(main.values()), sum(rejected.values()), files, verified)


def deep_verification(cfg, config: Path | str) -> tuple[str, list[str]]:
    """What `etl verify --deep` finds, as (a line for the report, the problems). In a process with
    a SparkSession on the job's metastore (the tests' `spark` fixture) its check (etl.ops.verify)
    runs here, on that session, which getOrCreate hands over: about 1.5 s, where the command spends
    about 10 s on its own JVM and Hive client (the oracle runs after most integration tests; the
    command itself, its output and exit code, have tests of their own). Elsewhere (a test's own
    metastore, no session) the command runs."""
    from pyspark import SparkContext
    active = SparkContext._active_spark_context
    if active is None or active.getConf().get("spark.hadoop.hive.metastore.uris", "") != cfg.hive.metastore:
        result = verify_deep(config)
        if result is None:
            return "etl verify --deep: not available", []
        said = f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        return f"etl verify --deep: exit {result.returncode}", (
            [] if result.returncode == 0 else [f"etl verify --deep exited {result.returncode}:\n{said}"])
    from etl.ops.verify import run_verify
    report = run_verify(cfg, deep=True)
    verdict = "OK" if report.ok else f"{len(report.problems)} problems"
    return f"etl verify --deep (its check, in this process): {verdict}", (
        [] if report.ok else [f"etl verify --deep's check:\n{report.render()}"])


@dataclass(frozen=True)
class Interim:
    state: JobState
    visible_uncommitted: int | None  # offsets readable in Hive beyond the committed ones (None: not read)


def check_interim(read_table: Callable[[str, str], Counter] | None, config: Path | str,
                  warehouse_dir: Path | str, produced: Counter) -> Interim:
    """What must hold at ANY moment, even right after a SIGKILL: no offset twice in Hive, no
    overlapping files, committed offsets covered by files (and visible in Hive)."""
    from etl.config import load_config
    from etl.job.write_mode import EVENT_TIME, configured_mode
    cfg = load_config(config)
    db, table = cfg.hive.database, cfg.hive.table
    state = job_state(config)
    tables = job_tables(cfg, {topic for topic, _p, _o in produced}, state.binding)
    problems = file_problems(warehouse_dir, db, table, committed=state.committed,
                             by_event_time=configured_mode(cfg.hive.partitioning) is EVENT_TIME,
                             tables=tables.tables, rejected_table=tables.rejected, split_topics=tables.split_topics)
    visible_uncommitted = None
    if read_table is not None:
        main, rejected, strays = tables.read(read_table, db)
        problems += strays
        both = main + rejected
        visible_uncommitted = sum(1 for k in both if k[2] >= state.committed.get((k[0], k[1]), 0))
        duplicates = {k: v for k, v in both.items() if v > 1}
        if duplicates:
            problems.append(f"offsets twice in Hive: {sorted(duplicates.items())[:5]}")
        invisible = [k for k in produced if k[2] < state.committed.get((k[0], k[1]), 0) and k not in both]
        if invisible:
            problems.append(f"{len(invisible)} committed offsets not in Hive, e.g. {sorted(invisible)[:5]}")
        foreign = sorted(set(both) - set(produced))
        if foreign:
            problems.append(f"offsets in Hive never produced: {foreign[:5]}")
    if problems:
        raise AssertionError(f"invariant broken in state {state.label()}:\n  " + "\n  ".join(problems))
    return Interim(state, visible_uncommitted)
