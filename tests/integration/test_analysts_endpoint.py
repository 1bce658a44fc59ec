"""The analysts' endpoint: the Spark Thrift Server (HiveServer2) that scripts/local-stack starts.

Analysts query it with beeline (scripts/beeline) while the ETL keeps committing. The promise
(docs/analysts.md) is that a query sees whole files only, never a row twice, and, with no
REFRESH TABLE, what the ETL has committed. The reader here is a HiveServer2 client (Hive's JDBC
driver, the one beeline uses, through the `spark` fixture's JVM). It queries over and over,
on one long-lived session and on fresh ones, while `etl run`s are held mid-batch by fault
points: while a task writes its temp file into an hour partition Hive already lists, and
after a file is published but not yet committed.

The oracle, for every result: no (topic, partition, offset) twice; in each table, the rows of
a data file are all there or none (the files' contents are read from the files afterwards, so
nothing is hard-coded); no row outside a file. At the end, the table and `<table>_rejected`
together hold every produced offset exactly once, read on the long session (no stale listing)
and through scripts/beeline (the documented way).

Checked that it fails: against a Thrift Server with Spark's default per-session file listing
cache (no spark.sql.hive.filesourcePartitionFileCacheSize=0), the long session's final read
missed every file committed into an hour it had already read; with temp names Hive does not
skip ("tmp." instead of "_tmp."), queries failed on the half-written files.
"""
from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq

from etl.model.naming import FileRange, parse_final_name
from tests.harness.data import event
from tests.harness.etl_process import run_etl
from tests.harness.jdbc import JdbcReader, offsets_sql, parse_offsets
from tests.harness.query_views import snapshot_problems


DB = "etl_test"


REPO = Path(__file__).resolve().parents[2]


PARTITIONS = 2


BAD_EVERY = 40  # every 40th record is garbled, so <table>_rejected gets files too


def temp_beside_final(table_dir: Path, topic: str) -> bool:
    """Whether a half-written file (some bytes on disk, no footer yet: the task's temp file) sits
    in a partition folder that already holds committed files of `topic`, i.e. in a folder Hive
    lists for queries. Were it visible to Hive, a query would fail on it (checked with temp
    names made visible: "... is not a Parquet file. Expected magic number at tail"), or,
    written in place under its final name, show part of it."""
    for folder in table_dir.glob("dt=*/hour=*"):
        try:
            files = [(p.name, p.stat().st_size) for p in folder.iterdir()]
        except FileNotFoundError:  # a temp file published meanwhile
            continue
        committed = [name for name, _ in files if (parse_final_name(name) or _NO_RANGE).topic == topic]
        if committed and any(name not in committed and size > 0 for name, size in files):
            return True
    return False


_NO_RANGE = FileRange("", -1, -1, -1)


def data_files(table_dir: Path) -> dict[FileRange, frozenset[int]]:
    files = {}
    for path in table_dir.glob("dt=*/hour=*/*"):
        name = parse_final_name(path.name)
        if name:
            files[name] = frozenset(pq.read_table(path, columns=["kafka_offset"]).column(0).to_pylist())
    return files


# -- the test -------------------------------------------------------------------------------------
def test_queries_during_etl_commits_see_whole_files_once_and_finally_everything(
        spark, thrift_url, new_topic, produce, write_config, hive_table_name, warehouse_dir):
    started = time.monotonic()
    topic = new_topic(partitions=PARTITIONS)
    config = write_config(kafka={"topics": topic},
                          job={"max_records_per_partition": "200", "row_group_size": "20"})
    produced = {p: 0 for p in range(PARTITIONS)}

    def produce_more(n: int) -> None:
        values = {}
        for p in range(PARTITIONS):
            values[p] = [b"{garbled" if (produced[p] + i) % BAD_EVERY == BAD_EVERY - 1 else event(produced[p] + i)
                         for i in range(n)]
            produced[p] += n
        produce(topic, values)

    table_dir = warehouse_dir / f"{DB}.db" / hive_table_name
    reader = JdbcReader(spark.sparkContext._jvm, thrift_url)
    long_session = reader.connect()
    sql = offsets_sql(hive_table_name)
    views: list[tuple[str, dict[str, Counter]]] = []  # (session kind, what one query saw)
    errors: list[str] = []
    during_write = 0  # queries that ran while a temp file sat beside committed files
    stop = threading.Event()

    holds = warehouse_dir.parent / "holds"  # where a held task leaves its marker (etl.faults, hold:)
    holds.mkdir()

    def query(fresh: bool, n: int) -> None:
        nonlocal during_write
        try:
            before = table_dir.exists() and temp_beside_final(table_dir, topic)
            connection = reader.connect() if fresh else long_session
            try:
                rows = JdbcReader.query(connection, sql)
            finally:
                if fresh:
                    connection.close()
            if before and temp_beside_final(table_dir, topic):
                during_write += 1
            views.append(("fresh" if fresh else "long", parse_offsets(rows)))
        except Exception as exc:  # a query that fails is a finding, e.g. a half-written file
            if "TABLE_OR_VIEW_NOT_FOUND" in str(exc) and not views:
                return  # the first run has not created both tables yet
            errors.append(f"query {n}: {str(exc)[:500]}")

    def read_repeatedly():
        n = 0
        while not stop.is_set():
            held = list(holds.glob("held-*"))
            # While a task is held, one query on the long session and one on a fresh one (as a
            # beeline one-liner opens); then the task is let go. Otherwise sessions alternate.
            for fresh in (False, True) if held else (n % 2 == 1,):
                n += 1
                query(fresh, n)
            for marker in held:
                marker.unlink()
            if not held:
                time.sleep(0.3)  # leave the two cores some room for the ETL

    thread = threading.Thread(target=read_repeatedly, daemon=True)
    thread.start()
    runs = []
    try:
        # Two runs, five batches of at most 200 records per partition, each held mid-commit.
        # Row groups of 20 rows: the temp file has bytes on disk when a chunk has been written.
        # A held task waits until the reader has queried (a fixed pause was not enough: one CI
        # run's queries were slow enough that none ran whole while a temp file sat there).
        for count, fault in ((500, "writing:0"),    # after its first chunk went into the temp file
                             (300, "renamed:1")):   # published, not yet committed
            produce_more(count)
            result = run_etl(config, fault=fault, action=f"hold:{holds}")
            runs.append(result)
            assert result.returncode == 0, "\n".join(
                line for line in (result.stdout + result.stderr).splitlines()
                if "etl" in line or "ERROR" in line)[-4000:]
        time.sleep(1)  # a few queries after the last commit too
    finally:
        stop.set()
        thread.join(timeout=120)
    states = {tuple(sum(seen[t].values()) for t in ("main", "rejected")) for _, seen in views}
    kinds = Counter(kind for kind, _ in views)
    print(f"\n{len(views)} queries ({kinds['long']} on one long session, {kinds['fresh']} on fresh ones), "
          f"{len(errors)} failed, {during_write} while a half-written temp file sat beside committed files, "
          f"{len(states)} distinct (rows, rejected rows) counts; {sum(produced.values())} records; "
          f"{time.monotonic() - started:.1f}s")

    batches = sum(line.count(" COMMITTED:") for r in runs for line in r.stdout.splitlines())
    assert batches == 5, [r.stdout for r in runs]
    files = {"main": data_files(table_dir),
             "rejected": data_files(warehouse_dir / f"{DB}.db" / f"{hive_table_name}_rejected")}
    assert files["rejected"], "no record was rejected: the rejected table was not exercised"

    assert errors == []
    problems = [f"{kind} session, query {i}: {p}" for i, (kind, seen) in enumerate(views)
                for p in snapshot_problems(seen, files)]
    assert problems == []

    # Finally everything, once, in exactly one of the two tables: on the long session (a stale
    # file listing would show up here) and through scripts/beeline, the documented way.
    expected = Counter((topic, p, o) for p, n in produced.items() for o in range(n))
    final_long = parse_offsets(JdbcReader.query(long_session, sql))
    long_session.close()
    final_beeline = parse_offsets(line.split("\t")
                                  for line in beeline(thrift_url, "--showHeader=false", "-e", sql + ";") if line)
    for how, final in (("long session", final_long), ("scripts/beeline", final_beeline)):
        both = final["main"] + final["rejected"]
        missing, extra = sorted(expected - both), sorted(both - expected)
        assert not missing and not extra, (f"{how}: {len(missing)} produced offsets missing, e.g. {missing[:3]}; "
                                           f"{len(extra)} extra or repeated, e.g. {extra[:3]}")
        assert snapshot_problems(final, files) == []

    # The reader really looked while commits were under way, and saw them progress.
    assert during_write >= 1
    assert len(states) >= 4


def beeline(url: str, *args: str) -> list[str]:
    """Run scripts/beeline (tab-separated output) and return its output lines, less the
    "\\rnull   \\rnull" that beeline 2.3 in --silent mode sometimes prints where its (empty)
    prompt would be when stdin is not a terminal."""
    result = subprocess.run([str(REPO / "scripts" / "beeline"), "--silent=true", "--outputformat=tsv2", *args],
                            capture_output=True, timeout=120, env={**os.environ, "ETL_THRIFT_URL": url})
    assert result.returncode == 0, result.stderr.decode(errors="replace")[-3000:]
    return [re.sub(r"(\rnull *)+", "", line).strip("\r")
            for line in result.stdout.decode(errors="replace").split("\n")]


# -- the analysts' page's queries -----------------------------------------------------------------
def readme_example_queries() -> str:
    """The SQL block under "Example queries" in docs/analysts.md."""
    page = (REPO / "docs" / "analysts.md").read_text(encoding="utf-8")
    return page.split("**Example queries.**", 1)[1].split("```sql\n", 1)[1].split("```", 1)[0]


def test_the_documented_example_queries_run_through_scripts_beeline(
        stack, thrift_url, new_topic, produce, write_config, hive_table_name, warehouse_dir, tmp_path):
    """The analysts' page's block, on a table of the quickstart's kind: logs.access_log and the topic
    access_logs replaced by the test's own, run as one file through scripts/beeline."""
    import datetime

    topic = new_topic(partitions=4)
    base = datetime.datetime(2017, 7, 30, 14, 0, 0)
    values, errors_per_minute = {}, Counter()
    for p in range(4):
        values[p] = []
        for i in range(5000):
            at, level = base + datetime.timedelta(seconds=i), "ERROR" if (i + p) % 7 == 0 else "INFO"
            if p == 3 and i % 500 == 499:
                values[p].append(b"\xff garbled line without a timestamp")
                continue
            values[p].append(f"{at:%Y-%m-%d %H:%M:%S} {level} message {p}-{i}".encode())
            if level == "ERROR":
                errors_per_minute[f"{at:%Y-%m-%d %H:%M}"] += 1
    produce(topic, values)
    config = write_config(kafka={"topics": topic}, job={"decoder": "access_log", "max_rejected_ratio": "0.05"},
                          hive={"schema": str(REPO / "warehouse_schema" / "access_log.sql")})
    result = run_etl(config)
    assert result.returncode == 0, result.stderr[-3000:]

    sql = readme_example_queries()
    assert "logs.access_log" in sql and "'access_logs'" in sql
    queries = tmp_path / "queries.sql"
    queries.write_text(sql.replace("logs.access_log", f"{DB}.{hive_table_name}").replace("'access_logs'", f"'{topic}'"))
    lines = beeline(thrift_url, "-f", str(queries))

    latest = sorted(errors_per_minute.items(), reverse=True)[:10]  # errors per minute, latest first
    assert lines[lines.index("minute\terrors") + 1:][:10] == [f"{m}\t{n}" for m, n in latest]
    found = [line for line in lines if line.startswith("access_log\t")]  # the record at 2:4711
    assert len(found) == 1 \
        and found[0].endswith("\tINFO\tmessage 2-4711" if (4711 + 2) % 7 else "\tERROR\tmessage 2-4711")
    assert f"/{topic}+2+{0:020d}+{5000:020d}.parquet" in found[0]
    assert [line.split("\t")[:2] for line in lines if line.startswith("3\t") and "garbled" in line] == [
        ["3", str(o)] for o in range(499, 5000, 500)]  # what was rejected
    for p in range(4):  # every offset accounted for
        assert f"{p}\t5000\t0\t4999" in lines
    assert sum(int(line.split("\t")[2]) for line in lines if line.count("\t") == 2 and line[:4].isdigit()) == 19990
