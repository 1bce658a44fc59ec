"""`etl verify --deep`: every row read back through Hive, against ZooKeeper and Kafka.

No (topic, partition, offset) may appear twice in the table and its rejected table together,
and every offset the walk of etl.ops.verify says must be loaded is in one of them, or absent from
Kafka too (compaction, transaction markers). Files whose Parquet footer cannot be read are
named first: a single one makes every query of the table fail, so the rows are not read then.
Every file a merge rewrote (etl.compaction.merge) is read whole and its values compared with the
checksums its merge recorded from its inputs (etl.sink.checksums): a count cannot see a changed
value, such as a date a merge read wrongly or a file edited by hand. Which files must carry
checksums, ZooKeeper's record of their compaction says, not the file.

A recreated topic's incarnations (etl.model.identity) hold other records at the same offsets:
rows are told apart by the incarnation tag in their file's name, and an offset is once per
incarnation. Kafka holds only the current incarnation's records: an earlier incarnation's
missing offsets cannot be checked against it.
"""
from __future__ import annotations

import functools
import posixpath
from dataclasses import dataclass
from typing import Callable, Collection, Mapping

from etl.hive.sql import quote_identifier, quote_literal
from etl.model.compaction import compaction_of_folder
from etl.model.events import Event
from etl.model.naming import INCARNATION_LENGTH
from etl.ops.coverage import MAX_LISTED, PartitionWalk, Problem, describe_partition, walk_partitions
from etl.ops.inventory import Inventory
from etl.config.model import HiveFormat
from etl.sink.checksums import Checksums, file_checksums, recorded
from etl.sink.file_format import open_data, read_footer
from etl.sink.fs import WarehouseFileSystem
from etl.state.znodes import CommittedOffset


def check_readable(fs: WarehouseFileSystem, inventory: Inventory) -> list[Problem]:
    """Every committed file's footer, read alone: a truncated or overwritten file is named here
    instead of failing the whole table read."""
    return [Problem("corrupt_file", path, f"not a readable data file ({reason}); every query of the table "
                    f"fails on it", _CORRUPT_ACTION) for path, reason in unreadable_files(fs, inventory)]


def unreadable_files(fs: WarehouseFileSystem, inventory: Inventory) -> list[tuple[str, str]]:
    """(path, why) of every committed file, main or rejected, whose footer (Parquet's or ORC's, as
    its table's format says) cannot be read."""
    found = []
    for path, file_format in sorted(inventory.formats.items()):
        try:
            read_footer(fs, path, file_format)
        except Exception as exc:  # pyarrow says ArrowInvalid, OSError or worse for a broken file
            found.append((path, _first_line(exc)))
    return found


def check_rewritten(fs: WarehouseFileSystem, inventory: Inventory, merged: Mapping[int, frozenset[str]],
                    moved: Collection[str]) -> list[Problem]:
    """Every merged file, main or rejected, holds the values its merge recorded, column by column.
    Which files must record checksums is their compaction's record's to say (`merged`: by
    compaction id, the names of its merged files that do, etl.state.compaction_records), never the
    file's own footer: one of them without `etl.checksums` is named. `moved`: paths `etl recover`
    or `etl reset-offsets` moved out of the table (their events): a file there since is a batch's.
    Batch files, and files merged before merges recorded checksums (no record), are skipped."""
    problems = []
    for path, file_format in sorted(inventory.formats.items()):
        with open_data(fs, path, file_format) as data:
            expected, schema = recorded(data.footer.metadata), data.schema
        if expected is None:
            problems += _unproven(path, merged, moved)
        else:
            problems += _altered(fs, path, schema, expected, file_format)
        if len(problems) >= MAX_LISTED:
            break
    return problems


def _unproven(path: str, merged: Mapping[int, frozenset[str]], moved: Collection[str]) -> list[Problem]:
    compaction = compaction_of_folder(posixpath.dirname(path))
    if compaction is None or posixpath.basename(path) not in merged.get(compaction, ()) or path in moved:
        return []
    return [Problem("altered_file", path, f"has no `etl.checksums` in its footer, yet compaction {compaction}'s record "
                    f"in ZooKeeper says its merge recorded them: it was rewritten after its merge, and its values "
                    f"cannot be proven", _ALTERED_ACTION)]


def _altered(fs: WarehouseFileSystem, path: str, schema, expected: Checksums,
             file_format: HiveFormat) -> list[Problem]:
    found = file_checksums(fs, path, schema, file_format)
    altered = expected.differing(found)
    if not altered and found.rows == expected.rows:
        return []
    shown = ", ".join(f"'{name}'" for name in altered) or "none"
    return [Problem("altered_file", path, f"holds other values than the merge that wrote it recorded from its inputs "
                    f"(column {shown}; {found.rows} rows, recorded {expected.rows}): it was changed after it was "
                    f"written", _ALTERED_ACTION)]


_ALTERED_ACTION = ("move the file out of the warehouse and run `etl recover`, which rewrites its ranges from Kafka "
                   "while Kafka still holds them")


_CORRUPT_ACTION = ("run `etl recover`: it moves the file out of the table (kept under the warehouse's "
                   "_etl_moved_aside folder) and rewrites its range from Kafka while Kafka still holds it")


@dataclass(frozen=True)
class TablesToRead:
    present: tuple[str, ...]  # in the metastore: read through Hive
    problems: list[Problem]  # missing, with committed files in their folders
    notices: list[str]  # missing, and nothing was ever written to them: fine


def tables_to_read(database: str, tables: tuple[str, ...], exists: Callable[[str], bool],
                   written: Callable[[str], bool]) -> TablesToRead:
    """The tables `verify --deep` can read. A routed table is created by the batch that first
    loads a record of its topics, so a table of topics still empty is not there yet, and is
    fine: no row can be missing from it (an offset committed without a file is still checked
    against the tables read). `written(table)`: its folder holds committed files."""
    present, problems, notices = [], [], []
    for table in tables:
        if exists(table):
            present.append(table)
        elif written(table):
            problems.append(Problem("missing_table", f"{database}.{table}", "is not in the metastore, yet its folder "
                                    "holds committed files: analysts cannot read their rows",
                                    "if it was dropped by mistake, create it again from its DDL (the tables are "
                                    "EXTERNAL, so the files are intact) and register its partitions: `etl recover` "
                                    "registers an open batch's; ALTER TABLE ... ADD PARTITION the others"))
        else:
            notices.append(f"table {database}.{table} does not exist yet: no committed range was written to it (its "
                           f"topics had no record so far); the batch that first loads one creates it")
    return TablesToRead(tuple(present), problems, notices)


def check_deep(spark, database: str, tables: tuple[str, ...], inventory: Inventory,
               committed: dict[tuple[str, int], CommittedOffset], events: list[Event],
               offsets_in_kafka) -> list[Problem]:
    """Read the tables (a routed job's every table, the rejected one last; those tables_to_read
    finds present) through Hive, as one: an offset is once in one of them. `offsets_in_kafka(topic,
    partition, start, end)` returns the offsets Kafka holds in [start, end), or None if Kafka no
    longer holds that range at all."""
    try:
        union = _lineage_union(spark, database, tables)
        union.createOrReplaceTempView("etl_verify_rows")
        problems = _duplicates(spark)
    except Exception as exc:  # Spark's own error, through py4j: name it, never a raw traceback
        where = f"{database}.{(tables or ('',))[0]}" + (f" (or one of {len(tables) - 2} more tables)"
                                                          if len(tables) > 2 else "")
        return [Problem("unreadable_table", where, f"reading the table through Hive failed: "
                        f"{_first_line(exc)}", "run `etl verify --deep` again; if it fails the same way, a file "
                        "of the table is broken: `etl recover` names and replaces broken files")]
    ranges = _committed_ranges(walk_partitions(inventory, committed, None, events))
    if not ranges:
        return problems
    spark.createDataFrame(ranges, "t string, p int, i string, lo long, hi long").createOrReplaceTempView(
        "etl_verify_ranges")
    found = {(r.t, r.p, r.i, r.lo): r.n for r in spark.sql(
        "SELECT r.t, r.p, r.i, r.lo, count(DISTINCT v.o) AS n FROM etl_verify_ranges r LEFT JOIN etl_verify_rows v "
        "ON v.t = r.t AND v.p = r.p AND v.i = r.i AND v.o >= r.lo AND v.o < r.hi "
        "GROUP BY r.t, r.p, r.i, r.lo").collect()}
    for t, p, i, lo, hi in ranges:
        if found.get((t, p, i, lo), 0) < hi - lo:
            current = committed[(t, p)].incarnation == i
            problems += _missing(spark, t, p, i, lo, hi, offsets_in_kafka if current else _gone_from_kafka)
    return problems


# The incarnation tag in a file's name (etl.model.naming), as Spark gives the file's URI; "" for
# the first incarnation's plain names. Written into a SQL string literal: each backslash doubled.
_INCARNATION_OF_FILE = r"(?:\\+|%2B)([A-Za-z0-9_-]{" + str(INCARNATION_LENGTH) + r"})\\.(?:parquet|orc)$"


def _lineage_union(spark, database: str, tables: tuple[str, ...]):
    frames = []
    for table in tables:
        name = f"{quote_identifier(database)}.{quote_identifier(table)}"
        spark.sql(f"REFRESH TABLE {name}")
        frames.append(spark.sql(f"SELECT kafka_topic AS t, kafka_partition AS p, kafka_offset AS o, "
                                f"regexp_extract(input_file_name(), '{_INCARNATION_OF_FILE}', 1) AS i FROM {name}"))
    if not frames:  # no table created yet: no row, so every committed offset must be explained
        return spark.createDataFrame([], "t string, p int, o long, i string")
    return functools.reduce(lambda union, frame: union.unionAll(frame), frames)


def _duplicates(spark) -> list[Problem]:
    rows = spark.sql("SELECT t, p, i, o, count(*) AS n FROM etl_verify_rows GROUP BY t, p, i, o HAVING count(*) > 1 "
                     f"ORDER BY t, p, i, o LIMIT {MAX_LISTED}").collect()
    return [Problem("duplicate_offset", f"{describe_partition(r.t, r.p, r.i)} offset {r.o}", f"appears {r.n} times in "
                    f"the table and its rejected table",
                    "run `etl verify` (without --deep) to find the overlapping files")
            for r in rows]


def _committed_ranges(walks: list[PartitionWalk]) -> list[tuple[str, int, str, int, int]]:
    """Every committed offset range a row must exist for: the files' ranges, plus the gaps
    between them (and up to the committed offset) that no recorded skip or reset explains."""
    return [(s.topic, s.partition, s.incarnation, s.lo, s.hi) for walk in walks for s in walk.spans]


def _gone_from_kafka(*_) -> None:
    """What Kafka holds of an incarnation the partition left: nothing (the topic was deleted)."""
    return None


def _missing(spark, t: str, p: int, i: str, lo: int, hi: int, offsets_in_kafka) -> list[Problem]:
    spark.range(lo, hi).createOrReplaceTempView("etl_verify_expected")
    absent = [r.id for r in spark.sql(
        f"SELECT e.id FROM etl_verify_expected e LEFT ANTI JOIN (SELECT o FROM etl_verify_rows "
        f"WHERE t = {quote_literal(t)} AND p = {int(p)} AND i = {quote_literal(i)}) v ON v.o = e.id "
        f"ORDER BY e.id").collect()]
    in_kafka = offsets_in_kafka(t, p, absent[0], absent[-1] + 1)
    where = f"{describe_partition(t, p, i)} offsets [{lo}, {hi})"
    if in_kafka is None:
        return [Problem("unverifiable", where, f"{len(absent)} offsets are not in the table (first {absent[0]}) "
                        f"and Kafka no longer holds them, so compaction cannot be told from loss",
                        "compare the file's row count with the producer's records if this matters")]
    lost = sorted(set(absent) & set(in_kafka))
    if not lost:
        return []  # compacted away or transaction markers: never records
    return [Problem("missing_offset", where, f"{len(lost)} offsets Kafka still holds are in neither the table "
                    f"nor the rejected table, e.g. {lost[:5]}",
                    "the file's content does not match its name: move the file out of the warehouse, then "
                    "`etl recover` rewrites its range from Kafka; run `etl verify --deep` again")]


def offsets_in_kafka(config, kafka, topic: str, partition: int, start: int, end: int) -> list[int] | None:
    from etl.source.ranges import read_range
    if topic not in kafka.topics_on_broker():
        return None  # deleted: Kafka holds none of its records, and would refuse to list its offsets
    low, high = kafka.watermarks([(topic, partition)])[(topic, partition)]
    if start < low:
        return None
    end = min(end, high)
    return [o for chunk in read_range(config.kafka, f"etl-{config.job.name}-verify", topic, partition, start, end,
                                      with_keys=False) for o in chunk.offsets] if end > start else []


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
