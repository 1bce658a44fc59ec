"""`etl verify`: the warehouse checked against ZooKeeper, partition by partition.

In the spirit of Secor's LogFileVerifier: for every Kafka partition the committed files'
ranges must be contiguous up to the committed offset and never overlap; every file must be
in a registered Hive partition; no temp file may be left. A gap is accepted only where
ZooKeeper records why (a skip of lost offsets, or an operator's reset). `--deep` reads the
table through Hive and proves that no (topic, partition, offset) appears twice and that
every committed offset is in the table, in the rejected table, or absent from Kafka.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from etl.batch import Batch
from etl.inventory import Inventory, WarehouseFile
from etl.zk_store import CommittedOffset

MAX_LISTED = 20


@dataclass(frozen=True)
class Problem:
    kind: str
    where: str
    detail: str
    action: str

    def describe(self) -> str:
        return f"[{self.kind}] {self.where}: {self.detail}\n    what to do: {self.action}"

    def to_json(self) -> dict:
        return asdict(self)


def explained_jumps(events: list[dict]) -> set[tuple[str, int, int, int]]:
    """(topic, partition, from, to) moves of the committed offset that ZooKeeper recorded."""
    jumps = set()
    for event in events:
        if event.get("kind") == "skipped":
            jumps.add((event["topic"], event["partition"], event["committed"], event["restart_at"]))
        elif event.get("kind") == "reset":
            for change in event["changes"]:
                if change["old"] is not None:
                    jumps.add((change["topic"], change["partition"], change["old"], change["new"]))
    return jumps


def check_ranges(inventory: Inventory, committed: dict[tuple[str, int], CommittedOffset],
                 open_batch: Batch | None, events: list[dict]) -> list[Problem]:
    jumps = explained_jumps(events)
    planned = {(r.topic, r.partition, r.start, r.end) for r in open_batch.file_ranges} if open_batch else set()
    problems = []
    for key, files in sorted(inventory.by_partition().items()):
        offset = committed.get(key)
        problems += _check_partition(key, files, None if offset is None else offset.value, planned, jumps)
    problems += _check_rejected(inventory, planned)
    return problems


def _check_partition(key, files: list[WarehouseFile], committed: int | None, planned, jumps) -> list[Problem]:
    topic, partition = key
    where = f"{topic}[{partition}]"
    problems, previous = [], None
    for f in files:
        r = f.range
        if committed is None or r.end > committed:
            if (r.topic, r.partition, r.start, r.end) not in planned:
                problems.append(_uncovered(where, f, committed))
            continue
        if previous is not None:
            problems += _between(where, previous, f, jumps)
        previous = f
    if previous is not None and committed is not None and previous.range.end != committed \
            and (topic, partition, previous.range.end, committed) not in jumps:
        problems.append(Problem("gap", where, f"the last committed file ends at {previous.range.end} but the "
                                f"committed offset is {committed}: offsets [{previous.range.end}, {committed}) "
                                f"are in no file", _GAP_ACTION))
    return problems


def _between(where: str, previous: WarehouseFile, current: WarehouseFile, jumps) -> list[Problem]:
    a, b = previous.range, current.range
    if b.start < a.end:
        return [Problem("overlap", where, f"{previous.path} and {current.path} both cover offsets "
                        f"[{b.start}, {min(a.end, b.end)}): those records are in the table twice",
                        "move the file that should not be there (usually the later copy from a manual "
                        "reset or a restored backup) out of the warehouse, then run `etl verify` again")]
    if b.start > a.end and (a.topic, a.partition, a.end, b.start) not in jumps:
        return [Problem("gap", where, f"no file covers offsets [{a.end}, {b.start}) between {previous.path} "
                        f"and {current.path}, and ZooKeeper records no skip or reset there", _GAP_ACTION)]
    return []


_GAP_ACTION = ("a file was deleted or moved by hand: restore it from backup; if it is gone, reload the "
               "offsets with `etl reset-offsets` (see the README, 'When a run crashed')")


def _uncovered(where: str, f: WarehouseFile, committed: int | None) -> Problem:
    return Problem("uncovered_file", where, f"{f.path} covers offsets [{f.range.start}, {f.range.end}) "
                   f"beyond the committed offset {committed} and belongs to no open batch plan",
                   "it was not written by this job's current state (a reset, a copied file, another job "
                   "writing to the same table?): move it out of the warehouse after checking where it came "
                   "from, or the next batch may load its records a second time")


def _check_rejected(inventory: Inventory, planned) -> list[Problem]:
    main = {(f.partition_path, f.range) for f in inventory.files}
    return [Problem("orphan_rejected_file", f"{f.range.topic}[{f.range.partition}]",
                    f"{f.path} has no matching file in the main table",
                    "check whether the main file was moved by hand; restore it, or move this file out")
            for f in inventory.rejected
            if (f.partition_path, f.range) not in main
            and (f.range.topic, f.range.partition, f.range.start, f.range.end) not in planned]


def check_temps(inventory: Inventory, lock_held_by: str | None) -> list[Problem]:
    if not inventory.temps or lock_held_by:
        return []  # a live run may be writing them right now
    listed = ", ".join(inventory.temps[:3])
    return [Problem("temp_file", "warehouse", f"{len(inventory.temps)} temp files left by dead attempts: {listed}",
                    "run `etl recover`, which deletes them (they are never part of the table)")]


def check_registered(inventory: Inventory, registered: set[str], open_batch: Batch | None) -> list[Problem]:
    open_path = "/".join(f"{k}={v}" for k, v in open_batch.partition_values.items()) if open_batch else None
    missing = sorted({f.partition_path for f in inventory.files if f.partition_path not in registered
                      and f.partition_path != open_path})
    return [Problem("unregistered_partition", path, "holds committed files but is not a partition of the Hive "
                    "table, so analysts do not see them",
                    "run `etl recover` (it registers the partitions of the open batch) or ALTER TABLE ... ADD "
                    "PARTITION for this directory") for path in missing]


def check_deep(spark, database: str, tables: tuple[str, str], inventory: Inventory,
               committed: dict[tuple[str, int], CommittedOffset], events: list[dict],
               offsets_in_kafka) -> list[Problem]:
    """Read the table and its rejected companion through Hive. `offsets_in_kafka(topic,
    partition, start, end)` returns the offsets Kafka holds in [start, end), or None if
    Kafka no longer holds that range at all."""
    union = _lineage_union(spark, database, tables)
    union.createOrReplaceTempView("etl_verify_rows")
    problems = _duplicates(spark)
    ranges = _committed_ranges(inventory, committed, explained_jumps(events))
    if not ranges:
        return problems
    spark.createDataFrame(ranges, "t string, p int, lo long, hi long").createOrReplaceTempView("etl_verify_ranges")
    found = {(r.t, r.p, r.lo): r.n for r in spark.sql(
        "SELECT r.t, r.p, r.lo, count(DISTINCT v.o) AS n FROM etl_verify_ranges r LEFT JOIN etl_verify_rows v "
        "ON v.t = r.t AND v.p = r.p AND v.o >= r.lo AND v.o < r.hi GROUP BY r.t, r.p, r.lo").collect()}
    for t, p, lo, hi in ranges:
        if found.get((t, p, lo), 0) < hi - lo:
            problems += _missing(spark, t, p, lo, hi, offsets_in_kafka)
    return problems


def _lineage_union(spark, database: str, tables: tuple[str, str]):
    frames = []
    for table in tables:
        spark.sql(f"REFRESH TABLE `{database}`.`{table}`")
        frames.append(spark.sql(f"SELECT kafka_topic AS t, kafka_partition AS p, kafka_offset AS o "
                                f"FROM `{database}`.`{table}`"))
    return frames[0].unionAll(frames[1])


def _duplicates(spark) -> list[Problem]:
    rows = spark.sql("SELECT t, p, o, count(*) AS n FROM etl_verify_rows GROUP BY t, p, o HAVING count(*) > 1 "
                     f"ORDER BY t, p, o LIMIT {MAX_LISTED}").collect()
    return [Problem("duplicate_offset", f"{r.t}[{r.p}] offset {r.o}", f"appears {r.n} times in the table and its "
                    f"rejected table", "run `etl verify` (without --deep) to find the overlapping files")
            for r in rows]


def _committed_ranges(inventory: Inventory, committed, jumps) -> list[tuple[str, int, int, int]]:
    """Every committed offset range a row must exist for: the files' ranges, plus the gaps
    between them (and up to the committed offset) that no recorded skip or reset explains."""
    ranges = []
    for (topic, partition), files in inventory.by_partition().items():
        if (topic, partition) not in committed:
            continue
        upto, cursor = committed[(topic, partition)].value, None
        for f in (f for f in files if f.range.end <= upto):
            if cursor is not None and f.range.start > cursor and (topic, partition, cursor, f.range.start) not in jumps:
                ranges.append((topic, partition, cursor, f.range.start))
            ranges.append((topic, partition, f.range.start, f.range.end))
            cursor = f.range.end
        if cursor is not None and cursor < upto and (topic, partition, cursor, upto) not in jumps:
            ranges.append((topic, partition, cursor, upto))
    return ranges


def _missing(spark, t: str, p: int, lo: int, hi: int, offsets_in_kafka) -> list[Problem]:
    spark.range(lo, hi).createOrReplaceTempView("etl_verify_expected")
    absent = [r.id for r in spark.sql(
        f"SELECT e.id FROM etl_verify_expected e LEFT ANTI JOIN (SELECT o FROM etl_verify_rows "
        f"WHERE t = '{t}' AND p = {p}) v ON v.o = e.id ORDER BY e.id").collect()]
    in_kafka = offsets_in_kafka(t, p, absent[0], absent[-1] + 1)
    where = f"{t}[{p}] offsets [{lo}, {hi})"
    if in_kafka is None:
        return [Problem("unverifiable", where, f"{len(absent)} offsets are not in the table (first {absent[0]}) "
                        f"and Kafka no longer holds them, so compaction cannot be told from loss",
                        "compare the file's row count with the producer's records if this matters")]
    lost = sorted(set(absent) & set(in_kafka))
    if not lost:
        return []  # compacted away or transaction markers: never records
    return [Problem("missing_offset", where, f"{len(lost)} offsets Kafka still holds are in neither the table "
                    f"nor the rejected table, e.g. {lost[:5]}",
                    "the file's content does not match its name: move the file out and reload its range "
                    "(`etl reset-offsets` to its start), then run `etl verify --deep` again")]


@dataclass(frozen=True)
class VerifyReport:
    problems: list[Problem]
    partitions: int
    files: int
    deep: bool

    @property
    def ok(self) -> bool:
        return not self.problems

    def render(self) -> str:
        head = (f"verified {self.partitions} partitions, {self.files} files"
                f"{' and every row (--deep)' if self.deep else ''}: ")
        if self.ok:
            return head + "OK, ranges are contiguous, nothing overlaps, nothing is left over"
        return head + f"{len(self.problems)} problems\n" + "\n".join(p.describe() for p in self.problems)

    def to_json(self) -> dict:
        return {"ok": self.ok, "partitions": self.partitions, "files": self.files, "deep": self.deep,
                "problems": [p.to_json() for p in self.problems]}


def run_verify(config, deep: bool) -> VerifyReport:
    from etl.fs import filesystem_for
    from etl.inventory import take_inventory
    from etl.kafka_source import KafkaMetadata
    from etl.spark_session import build_spark
    from etl.warehouse import Warehouse
    from etl.zk_store import ZkStateStore

    warehouse = Warehouse.of(config)
    inventory = take_inventory(filesystem_for(config.warehouse), warehouse.table_root, warehouse.rejected_root)
    with ZkStateStore(config.zookeeper, config.job.name, config.retry) as store:
        committed, opened, events = store.committed_offsets(), store.open_batch(), store.events()
        holder = store.lock_holder()
    open_batch = opened[0] if opened else None
    problems = check_ranges(inventory, committed, open_batch, events)
    problems += check_temps(inventory, holder.describe() if holder else None)
    spark = build_spark(config)
    problems += check_registered(inventory, registered_partitions(spark, config.hive), open_batch)
    if deep:
        kafka = KafkaMetadata(config.kafka, config.retry, config.job.name)
        try:
            problems += check_deep(spark, config.hive.database, (config.hive.table, config.hive.rejected_table),
                                   inventory, committed, events, lambda *r: offsets_in_kafka(config, kafka, *r))
        finally:
            kafka.close()
    return VerifyReport(problems, len(inventory.by_partition()), len(inventory.files), deep)


def registered_partitions(spark, hive) -> set[str]:
    rows = spark.sql(f"SHOW PARTITIONS `{hive.database}`.`{hive.table}`").collect()
    return {row[0] for row in rows}


def offsets_in_kafka(config, kafka, topic: str, partition: int, start: int, end: int) -> list[int] | None:
    from etl.kafka_source import read_range
    low, high = kafka.watermarks([(topic, partition)])[(topic, partition)]
    if start < low:
        return None
    end = min(end, high)
    return [o for chunk in read_range(config.kafka, f"etl-{config.job.name}-verify", topic, partition, start, end,
                                      with_keys=False) for o in chunk.offsets] if end > start else []
