"""A rollup in Hive, kept by the card's own mechanism ([rollup <name>], docs/rollups.md): each
range's partial is a file named by the range's offsets, published after the range's data file and
before the batch is WRITTEN, registered as a partition of `<rollup>_partials`, and merged by the
view `<rollup>`.

The oracle: after SIGKILLs between a data file's rename and its partial's, and right after a
partial's rename, the view equals a recount of the raw table, value for value (counts, sums,
minimums and maximums, NULLs counted as SQL counts them), and every data file has exactly one
partial of the same name. Nothing is hard-coded: the expected rows are recounted from the table.
"""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from etl.config import load_config
from etl.config.model import HiveFormat
from etl.model.naming import FileRange, parse_final_name
from tests.harness.etl_process import run_etl
from tests.harness.rollups import DB, ERRORS_ONLY, ROLLUP, in_utc, log_event, recounted
from tests.harness.state import wait_for_lock_release
from tests.harness.oracle import check_exactly_once, deep_verification, expected_offsets, hive_reader
from tests.harness.warehouse_files import DATA_SUFFIX, file_footer

PARTITIONS = 2
FILE_FORMAT = HiveFormat(DATA_SUFFIX[1:])


def range_stems(table_dir: Path) -> list[str]:
    """The stem of every range the table's files hold: a file's own, or a merged file's each (its
    footer's etl.ranges). Superseded files are deleted at once here (keep_superseded_minutes = 0)."""
    stems = []
    for path in table_dir.rglob(f"*{DATA_SUFFIX}"):
        named = parse_final_name(path.name, FILE_FORMAT)
        if named is None:
            continue
        spans = json.loads(file_footer(path).get(b"etl.ranges", b"null")) or [(named.start, named.end)]
        stems += [FileRange(named.topic, named.partition, a, b, named.incarnation).stem for a, b in spans]
    return sorted(stems)


def test_a_rollup_equals_a_recount_of_its_table_through_sigkills_around_its_partials(
        spark, zk, new_topic, produce, write_config, hive_table_name, warehouse_dir):
    topic = new_topic(partitions=PARTITIONS)
    produced = {p: 0 for p in range(PARTITIONS)}

    def produce_more(n: int) -> None:
        produce(topic, {p: [log_event(p * 100_000 + produced[p] + i) for i in range(n)] for p in range(PARTITIONS)})
        for p in range(PARTITIONS):
            produced[p] += n

    rollup = {key: value.format(table=hive_table_name) for key, value in ROLLUP.items()}
    config = write_config(kafka={"topics": topic}, job={"max_records_per_partition": "150"},
                          zookeeper={"session_timeout_seconds": "4"}, **{"rollup per_minute": rollup})
    produce_more(400)
    # Killed with partition 0's data file published and its partial not written; then right
    # after a partial's rename; then at WRITTEN (every partial in place, no partition of the
    # partials table added yet); then every batch to the end.
    for fault in ("renamed:0", "rollup:1", "state:WRITTEN"):
        killed = run_etl(config, fault=fault)
        assert killed.returncode == -9, killed.describe()
        wait_for_lock_release(zk, config)
    done = run_etl(config)  # the open batch, then the rest, until caught up
    assert done.returncode == 0, done.describe()
    produce_more(100)
    done = run_etl(config)
    assert done.returncode == 0, done.describe()

    check_exactly_once(hive_reader(spark), config, expected_offsets(topic, produced), warehouse_dir)
    view, partials = rollup["table"], f"{rollup['table']}_partials"
    table_dir, partials_dir = (Path(warehouse_dir) / f"{DB}.db" / name for name in (hive_table_name, partials))
    rolled = check_view_is_a_recount(spark, hive_table_name, view, partials, table_dir, partials_dir)

    # An operator moves partition 0's last two ranges out and loads them again as one range: their
    # partials go out with them (a partial left behind would be counted beside the new range's).
    reset = run_etl(config, "--to", f"{topic}:0=300", "--move-aside", "--execute", command="reset-offsets")
    assert reset.returncode == 0, reset.describe()
    moved = [p.name for p in (Path(warehouse_dir) / "_etl_moved_aside").rglob(f"*{partials}/*/*/*")]
    assert len(moved) == 2, moved
    reloaded = run_etl(write_config(kafka={"topics": topic}, **{"rollup per_minute": rollup}))
    assert reloaded.returncode == 0, reloaded.describe()
    check_exactly_once(hive_reader(spark), config, expected_offsets(topic, produced), warehouse_dir)
    assert check_view_is_a_recount(spark, hive_table_name, view, partials, table_dir, partials_dir) == rolled

    # The rollup's definition changed, and another rollup added to the loaded table: each refused
    # before a batch is planned, naming it. A compaction merges the partition's files; then each
    # rollup is rebuilt from the rows the table holds (a merged file's ranges split out of it).
    produce_more(10)
    changed_rollup, late = {**rollup, "where": ERRORS_ONLY}, {**rollup, "table": f"{hive_table_name}_late"}
    changed = write_config(kafka={"topics": topic}, compaction={"min_files": "2", "keep_superseded_minutes": "0"},
                           **{"rollup per_minute": changed_rollup, "rollup late": late})
    refused = run_etl(changed)
    assert refused.returncode == 2 and "another definition" in refused.stderr, refused.describe()
    only_late = write_config(kafka={"topics": topic}, **{"rollup per_minute": rollup, "rollup late": late})
    refused = run_etl(only_late)
    assert refused.returncode == 2 and "[rollup late]: the table already holds rows" in refused.stderr, \
        refused.describe()
    partition = next(table_dir.glob("dt=*/hour=*")).relative_to(table_dir).as_posix()
    compacted = run_etl(changed, "--partition", partition, "--execute", command="compact")
    assert compacted.returncode == 0, compacted.describe()
    assert any(b"etl.ranges" in file_footer(path) for path in table_dir.rglob(f"*{DATA_SUFFIX}")), \
        "no file was merged: the rebuild's split of a merged file is not exercised"
    for name in ("per_minute", "late"):
        rebuilt = run_etl(changed, "--rollup", name, "--execute", command="rollup rebuild")
        assert rebuilt.returncode == 0 and "done:" in rebuilt.stdout, rebuilt.describe()
    assert run_etl(changed).returncode == 0
    check_exactly_once(hive_reader(spark), changed, expected_offsets(topic, produced), warehouse_dir)
    for name, where in ((view, ERRORS_ONLY), (late["table"], ROLLUP["where"])):
        check_view_is_a_recount(spark, hive_table_name, name, f"{name}_partials", table_dir,
                                table_dir.parent / f"{name}_partials", where)

    # Hands in the partials folder: one partial deleted, one's counts changed. `etl verify --deep`
    # recomputes each from its range's rows and names both; a rebuild mends them.
    held = sorted(path for path in (table_dir.parent / partials).rglob("*.parquet"))
    held[0].unlink()
    changed_counts = pq.read_table(held[1])
    pq.write_table(changed_counts.set_column(changed_counts.schema.get_field_index("events"), "events",
                                             pc.add(changed_counts["events"], 1)), held[1])
    _, found = deep_verification(load_config(changed), changed)
    kinds = {kind for kind in ("rollup_partial_missing", "rollup_partial_differs") if kind in "\n".join(found)}
    assert kinds == {"rollup_partial_missing", "rollup_partial_differs"}, found
    assert run_etl(changed, "--rollup", "per_minute", "--execute", command="rollup rebuild").returncode == 0
    check_exactly_once(hive_reader(spark), changed, expected_offsets(topic, produced), warehouse_dir)
    print(f"\nrollup {view}: {len(rolled)} groups equal a recount of {sum(produced.values())} records, through 3 "
          f"SIGKILLs, a reset that moved {len(moved)} partials aside, a compaction and two rebuilds; a deleted and a "
          f"changed partial named by verify --deep, and rebuilt")


def check_view_is_a_recount(spark, table: str, view: str, partials: str, table_dir: Path, partials_dir: Path,
                            where: str = ROLLUP["where"]) -> set:
    """The view's rows, once checked equal to a recount of the table, and each range's partial in place."""
    data_stems = range_stems(table_dir)
    partial_stems = sorted(path.name.removesuffix(".parquet") for path in partials_dir.rglob("*") if path.is_file())
    assert data_stems and partial_stems == data_stems, (data_stems, partial_stems)  # one each, no temp file
    spark.sql(f"REFRESH TABLE {DB}.{partials}")
    spark.sql(f"REFRESH TABLE {DB}.{table}")
    recount, rolled = recounted(spark, table, where), in_utc(spark, f"SELECT * FROM {DB}.{view}")
    assert len(recount) >= 10 and rolled == recount, (sorted(recount - rolled)[:5], sorted(rolled - recount)[:5])
    return rolled
