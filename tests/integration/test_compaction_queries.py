"""Analysts query the Thrift Server over and over while `etl compact` merges their partition.

Queries run on one long-lived session and on fresh ones (as in test_analysts_endpoint), while a
compaction is held by `sleep` fault points: after the merged files are written (Hive still reads
the old folder), after the metastore was switched (before ZooKeeper records it), and while the
replaced files are deleted after their grace period. No query may see an offset twice or miss
one that was committed before it started; the final read is exactly the produced offsets.
"""
from __future__ import annotations

import json
import threading
import time
from collections import Counter

from tests.harness.etl_process import run_etl
from tests.harness.jdbc import JdbcReader, offsets_sql, parse_offsets

RECORDS = {0: 30, 1: 24}


def records(count: int, start: int = 0) -> list[bytes]:
    return [json.dumps({"event_id": i, "ts": "2026-11-20 10:15:00"}).encode() for i in range(start, start + count)]


def test_queries_during_a_compaction_see_every_committed_row_once(spark, thrift_url, new_topic, produce,
                                                                  write_config, hive_table_name, warehouse_dir):
    topic = new_topic(partitions=2)
    produce(topic, {p: records(n) for p, n in RECORDS.items()})
    config = write_config(kafka={"topics": topic}, job={"max_records_per_partition": "6"},
                          compaction={"min_files": "2", "keep_superseded_minutes": "0.1"})
    assert run_etl(config).returncode == 0
    root = warehouse_dir / "etl_test.db" / hive_table_name
    [partition] = sorted(str(p.relative_to(root)) for p in root.glob("dt=*/hour=*"))
    expected = Counter((topic, p, o) for p, n in RECORDS.items() for o in range(n))

    reader = JdbcReader(spark.sparkContext._jvm, thrift_url)
    long_session = reader.connect()
    sql = offsets_sql(hive_table_name)
    views: list[tuple[str, Counter]] = []
    errors: list[str] = []
    stop = threading.Event()

    def read_repeatedly():
        n = 0
        while not stop.is_set():
            n += 1
            fresh = n % 2 == 0
            try:
                connection = reader.connect() if fresh else long_session
                try:
                    seen = parse_offsets(JdbcReader.query(connection, sql))
                finally:
                    if fresh:
                        connection.close()
                views.append(("fresh" if fresh else "long", seen["main"] + seen["rejected"]))
                time.sleep(0.2)
            except Exception as exc:  # a query that fails is a finding: a file deleted under it
                errors.append(f"query {n}: {str(exc)[:500]}")
                time.sleep(0.5)

    thread = threading.Thread(target=read_repeatedly, daemon=True)
    thread.start()
    try:
        time.sleep(2)
        for fault in ("compact:WRITTEN", "compact:metastore-switched"):
            held = run_etl(config, "--execute", "--partition", partition, command="compact", fault=fault,
                           action="sleep:4")
            assert held.returncode == 0, held.describe()
            if fault == "compact:WRITTEN":  # a second compaction needs new small files: two more batches
                time.sleep(7)  # past the grace period: this run deletes the replaced files first
                produce(topic, {0: records(12, 30)})
                expected.update((topic, 0, o) for o in range(30, 42))
                assert run_etl(config).returncode == 0
        time.sleep(7)  # the second compaction's replaced files reach the end of their grace period
        deleting = run_etl(config, "--execute", command="compact", fault="compact:DELETED", action="sleep:3")
        assert deleting.returncode == 0, deleting.describe()
        time.sleep(1)
    finally:
        stop.set()
        thread.join(timeout=60)
    kinds = Counter(kind for kind, _ in views)
    print(f"\n{len(views)} queries ({kinds['long']} long session, {kinds['fresh']} fresh), {len(errors)} failed")
    assert not errors, errors[:3]
    assert len(views) >= 20, len(views)
    for index, (kind, seen) in enumerate(views):
        twice = [k for k, n in seen.items() if n > 1]
        assert not twice, f"query {index} ({kind}) saw offsets twice: {twice[:5]}"
        first = Counter((topic, p, o) for p, n in RECORDS.items() for o in range(n))
        missing = [k for k in first if k not in seen]
        assert not missing, f"query {index} ({kind}) missed committed offsets: {missing[:5]}"
    final = parse_offsets(JdbcReader.query(long_session, sql))
    assert final["main"] + final["rejected"] == expected
    long_session.close()
    assert len(list(root.rglob("_compacted/*/*/c*/*.parquet"))) == 2  # both compactions' output, the first's deleted
