"""A table stored as ORC ([hive] format = orc) on the real stack: loaded through a SIGKILL that
leaves its files published and the batch open, compacted through a SIGKILL, read back
through Hive (Spark) and the analysts' endpoint (the Thrift Server, Hive's JDBC driver), exactly
once, with `etl verify --deep` (its checksums read from ORC's own footer). Its rejected table stays
Parquet (one table definition for every job), and a config that names another format for the
table is refused, exit 2, naming it, with nothing touched.

The shipped DDL (warehouse_schema/events.sql) names no format: the table is made as [hive] format
says (etl.model.table_ddl).
Values an ORC table cannot read back (etl.rows.hive_values.ORC_FILES: timestamps outside
1677-09-22 .. 2262-04-10, dates before 1582-10-15) go to the rejected table with that range as
their reason; the test loads some. Event time, routes, compaction and `reset-offsets
--move-aside` on ORC are test_routes_event_time.py's; SIGKILLs at other points on ORC tables,
test_crash.py's (ON_ORC).
"""
from __future__ import annotations

import datetime as dt
import json
import signal
from pathlib import Path

import pyarrow.orc as orc

from etl.model.compaction import COMPACTED_FOLDER
from etl.sink.checksums import CHECKSUMS_KEY
from tests.harness.campaign import zone_whose_hour_lasts
from tests.harness.etl_process import etl_command, run_etl
from tests.harness.jdbc import JdbcReader
from tests.harness.oracle import check_exactly_once, expected_offsets, hive_reader, table_offsets
from tests.harness.paths import EVENTS_SCHEMA
from tests.harness.state import job_state, wait_for_lock_release

DB = "etl_test"
UTC = dt.timezone.utc
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)
COUNTS = {0: 30, 1: 24}  # 6 records a batch: 5 and 4 ranges
# Outside what an ORC table reads back, each kept by a Parquet table: rejected here, with the range.
FAR = {5: "1500-06-01T12:00:00Z", 11: "2262-04-12T00:00:00Z", 17: "9999-12-30T00:00:00Z"}


def ts_of(partition: int, offset: int) -> str | None:
    if partition == 0 and offset in FAR:
        return FAR[offset]
    return None if offset % 9 == 4 else f"1677-09-22T00:00:{offset:02d}Z" if offset % 10 == 3 else \
        f"2026-11-29T10:{offset:02d}:00.{partition}{offset:02d}Z"


def value(partition: int, offset: int) -> bytes:
    if offset % 7 == 6:
        return b"not json"
    return json.dumps({"event_id": partition * 1000 + offset, "user_id": f"u{offset % 5}", "amount": offset + 0.25,
                       "ts": ts_of(partition, offset)}).encode()


def kept(partition: int, offset: int) -> bool:
    return offset % 7 != 6 and not (partition == 0 and offset in FAR)


def micros(text: str | None) -> int | None:
    if text is None:
        return None
    return (dt.datetime.fromisoformat(text.replace("Z", "+00:00")) - EPOCH) // dt.timedelta(microseconds=1)


def data_files(root: Path) -> dict[str, list[Path]]:
    found: dict[str, list[Path]] = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.name.startswith(("_", ".")) and path.suffix in (".orc", ".parquet"):
            found.setdefault(path.suffix, []).append(path)
    return found


def through_thrift(spark, thrift_url: str, table: str) -> dict[tuple[int, int], int | None]:
    """(partition, offset) -> ts as epoch microseconds, read through the Thrift Server."""
    reader = JdbcReader(spark.sparkContext._jvm, thrift_url)
    connection = reader.connect()
    try:
        rows = JdbcReader.query(connection, f"SELECT kafka_partition, kafka_offset, unix_micros(ts) "
                                            f"FROM `{DB}`.`{table}`")
    finally:
        connection.close()
    return {(int(p), int(o)): None if t is None else int(t) for p, o, t in rows}


def test_an_orc_table_loads_compacts_and_reads_back_exactly_once_through_sigkills(
        spark, zk, thrift_url, new_topic, produce, write_config, hive_table_name, warehouse_dir):
    topic = new_topic(partitions=2)
    produce(topic, {p: [value(p, o) for o in range(n)] for p, n in COUNTS.items()})
    config = write_config(kafka={"topics": topic}, zookeeper={"session_timeout_seconds": "4"},
                          job={"max_records_per_partition": "6", "max_rejected_ratio": "0.9"},
                          hive={"format": "orc", "schema": str(EVENTS_SCHEMA),
                                "partition_timezone": zone_whose_hour_lasts(300)},
                          compaction={"min_files": "2", "keep_superseded_minutes": "0", "only_finished": "false"})
    killed = run_etl(config, fault="state:WRITTEN")  # resumed by the next run, which finds its files in place
    assert killed.returncode == -signal.SIGKILL, killed.describe()
    wait_for_lock_release(zk, config)
    finished = run_etl(config)
    assert finished.returncode == 0, finished.describe()
    expected = expected_offsets(topic, COUNTS)
    oracle = check_exactly_once(hive_reader(spark), config, expected, warehouse_dir)

    root, rejected_root = (warehouse_dir / f"{DB}.db" / name
                           for name in (hive_table_name, f"{hive_table_name}_rejected"))
    assert set(data_files(root)) == {".orc"} and set(data_files(rejected_root)) == {".parquet"}
    described = " ".join(str(row) for row in spark.sql(f"DESCRIBE FORMATTED `{DB}`.`{hive_table_name}`").collect())
    assert "OrcInputFormat" in described, described
    reasons = {r[0]: r[1] for r in spark.sql(f"SELECT kafka_offset, error FROM `{DB}`.`{hive_table_name}_rejected` "
                                            f"WHERE kafka_partition = 0").collect()}
    assert all("1677-09-22" in reasons[offset] and "2262-04-10" in reasons[offset] for offset in FAR), reasons
    want = {(p, o): micros(ts_of(p, o)) for p, n in COUNTS.items() for o in range(n) if kept(p, o)}
    assert through_thrift(spark, thrift_url, hive_table_name) == want

    killed = run_etl(config, "--execute", command="compact", fault="compact:merged:0")
    assert killed.returncode != 0, killed.describe()
    wait_for_lock_release(zk, config)
    carried_on = etl_command(config, "compact", "--execute")
    assert carried_on.returncode == 0, carried_on.describe()
    merged = data_files(root / COMPACTED_FOLDER)
    assert set(merged) == {".orc"} and all(CHECKSUMS_KEY in orc.ORCFile(str(p)).metadata for p in merged[".orc"])
    compacted = check_exactly_once(hive_reader(spark), config, expected, warehouse_dir)  # verify --deep: checksums
    assert through_thrift(spark, thrift_url, hive_table_name) == want

    before = (job_state(config).committed, sorted(root.rglob("*")))
    as_parquet = write_config(kafka={"topics": topic}, hive={"format": "parquet"})
    refused = run_etl(as_parquet)
    assert refused.returncode == 2, refused.describe()
    assert f"table {DB}.{hive_table_name} is stored as orc, but [hive] format = parquet" in refused.stderr, \
        refused.describe()
    assert (job_state(config).committed, sorted(root.rglob("*"))) == before

    # The way to the other format: the job moved to a new table (docs/operating.md), made as Parquet.
    moved = write_config(kafka={"topics": topic}, hive={"format": "parquet", "table": f"{hive_table_name}_pq"})
    assert etl_command(moved, "bind", "--execute").returncode == 0
    produce(topic, {0: [value(0, o) for o in range(COUNTS[0], COUNTS[0] + 6)]})
    onward = run_etl(moved)
    assert onward.returncode == 0 and "COMMITTED" in onward.stdout, onward.describe()
    new_root = warehouse_dir / f"{DB}.db" / f"{hive_table_name}_pq"
    assert set(data_files(new_root)) == {".parquet"} and set(data_files(root)) == {".orc"}
    assert sorted(o for (_t, p, o) in table_offsets(spark, DB, f"{hive_table_name}_pq") if p == 0) == \
        [o for o in range(COUNTS[0], COUNTS[0] + 6) if kept(0, o)]
    print(f"[orc] a SIGKILL of `etl run` and one of `etl compact`: {oracle.describe()}; after "
          f"compaction into {len(merged['.orc'])} ORC files: {compacted.describe()}")
