"""`etl verify`: the warehouse checked against ZooKeeper, partition by partition.

In the spirit of Secor's LogFileVerifier, with no blind spot: every Kafka partition with a
committed offset in ZooKeeper is walked, whether or not any file of it is found, and its
files must tile [origin, committed), where the origin is the first offset the job planned
for it (recorded with the offset). So a deleted first file, or a partition whose files are
all gone, is a gap. A gap is accepted only where ZooKeeper records why: a skip of lost
offsets, an operator's reset, or a loss the operator accepted. A recreated topic's partition
is walked once per incarnation the job loaded of it, each over its own files and committed
offsets (etl.ops.coverage). Files never overlap within an incarnation; every file is in a
registered Hive partition whose location is the folder the job writes; no temp file is left. A
range whose rejected file `etl recover` moved out has a rejected file in the table again, unless
the range was rewritten whole (etl.ops.rejected_moves: `missing_rejected`). By event time each
range's files match its manifest (etl.ops.parts). A job with
[route] sections is checked over every table its committed topics and open batch map to, retired
routes' included (etl.ops.job_tables), each partition's ranges across all of them; a split
range's file must be in each table its manifest lists. A compacted
partition is checked in its current folder, with each merged file's ranges (etl.ops.inventory);
replaced files are accepted only while a compaction waits to delete them (etl.ops.compaction_check). `--deep`
(etl.ops.verify_deep) reads every file and both tables through Hive and
proves that no (topic, partition, offset) appears twice and that every committed offset is
in the table, in the rejected table, or absent from Kafka. The checks are etl.ops.coverage's
(shared with `etl recover`) and etl.ops.verify_deep's; this module gathers the state and runs them.

A topic the job has committed offsets of but no longer loads (deleted from Kafka, or no longer
chosen by [kafka] topics or topics_regex, or by any [route]) is walked like any other; that it
is not loaded is a notice, not a problem: nothing is missing from the warehouse because of it.
So are the topics topics_regex matches but whose names Hive would hide (etl.source.topics).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from etl.context.job import JobContext
from etl.errors import KafkaReadError, KafkaUnavailable
from etl.hive.catalog import table_exists
from etl.hive.registrar import registered_partitions
from etl.model.batch import Batch
from etl.model.compaction import TableKind
from etl.model.events import MovedAside, Reset
from etl.ops.compaction_check import check_superseded, switching
from etl.ops.coverage import Problem, check_ranges, check_registered, check_temps
from etl.ops.inventory import Inventory
from etl.ops.rollup_files import check_partials
from etl.ops.rollup_postgres import check_in_postgres
from etl.sink.warehouse import Warehouse
from etl.ops.job_tables import job_tables, take_job_inventory
from etl.ops.legacy_names import check_legacy_names
from etl.ops.placement_check import check_placement
from etl.ops.rejected_moves import check_moved_rejected
from etl.ops.verify_deep import check_deep, check_readable, check_rewritten, offsets_in_kafka, tables_to_read
from etl.source.topics import not_loaded_topics


@dataclass(frozen=True)
class VerifyReport:
    problems: list[Problem]
    partitions: int
    files: int
    deep: bool
    topics_not_loaded: list[dict] = field(default_factory=list)  # etl.source.topics, as JSON
    notices: list[str] = field(default_factory=list)  # worth knowing, but not failures

    @property
    def ok(self) -> bool:
        return not self.problems

    def render(self) -> str:
        head = (f"verified {self.partitions} partitions, {self.files} files"
                f"{' and every row (--deep)' if self.deep else ''}: ")
        notices = "".join(f"\nnotice: {notice}" for notice in self.notices)
        if self.ok:
            return head + "OK, ranges are contiguous, nothing overlaps, nothing is left over" + notices
        return head + f"{len(self.problems)} problems\n" + "\n".join(p.describe() for p in self.problems) + notices

    def to_json(self) -> dict:
        return {"ok": self.ok, "partitions": self.partitions, "files": self.files, "deep": self.deep,
                "problems": [p.to_json() for p in self.problems], "notices": self.notices,
                "topics_not_loaded": self.topics_not_loaded}


def run_verify(config, deep: bool) -> VerifyReport:
    with JobContext(config) as context:
        return _verify(context, deep)


def _verify(context: JobContext, deep: bool) -> VerifyReport:
    config, fs, store = context.config, context.fs, context.store
    committed, opened, events = store.offsets.committed_offsets(), store.batches.open_batch(), store.operator.events()
    holder, compactions = store.session.lock_holder(), [plan for plan, _ in store.compactions.open_compactions()]
    warehouse = context.located()
    open_batch = opened[0] if opened else None
    tables = job_tables(config, warehouse, {topic for topic, _ in committed}, open_batch, store.operator.binding())
    held = take_job_inventory(fs, warehouse, tables)
    inventories, inventory, manifests = held.by_table, held.whole, held.manifests
    problems = check_ranges(inventory, committed, open_batch, events) + held.part_problems(open_batch)
    problems += check_moved_rejected(fs, warehouse, inventory, committed, events)
    problems += check_temps(inventory, holder.describe() if holder else None)
    problems += check_superseded(inventory, compactions, warehouse)
    for _, view in tables:
        problems += check_legacy_names(fs, view)
    for name, view, kind in [*((n, v, TableKind.MAIN) for n, v in tables),
                             (config.hive.rejected_table, warehouse, TableKind.REJECTED)]:
        locations = registered_partitions(context.catalog, config.hive, name)
        expected = {path: view.hive_uri(view.folder(kind, path)) for path in locations}
        found = check_registered(inventories.get(name, Inventory()), locations, expected, open_batch)
        plan_name = context.shape.plan_name(name) if kind is TableKind.MAIN else None  # the rejected table's: none
        problems += switching(found, kind, plan_name, compactions,
                              locations, view)
    notices: list[str] = []
    if deep:
        deep_problems, notices = _deep(context, context.spark.session(), inventory, committed, events, inventories)
        problems += deep_problems + check_placement(config, fs, context.partitioner, inventories, manifests)
    readable = not any(problem.kind == "corrupt_file" for problem in problems)  # a partial is recomputed from its file
    problems += _rollup_problems(context, warehouse, inventories, open_batch, deep and readable)
    not_loaded, topic_notices = _topics_not_loaded(context, committed)
    return VerifyReport(problems, len(set(inventory.by_partition()) | set(committed)), len(inventory.paths), deep,
                        not_loaded, notices + topic_notices)


def _rollup_problems(context: JobContext, warehouse: Warehouse, inventories: dict[str, Inventory],
                     open_batch: Batch | None, deep: bool) -> list[Problem]:
    """Each rollup's partials against its table's files (etl.ops.rollup_files): each committed
    range's in place, none of no range; `deep`, each recomputed from its rows. An open batch's
    ranges are left to the run that finishes it, which writes their partials."""
    if not context.config.rollups:
        return []  # no writer spec is built for nothing
    opened = {r.file_range for r in open_batch.file_ranges} if open_batch is not None else set()
    problems = []
    for route in context.config.routes.routes:
        for spec in context.spec_for(route).rollups if not route.from_registry else ():
            held = inventories.get(route.table)
            files = held.files if held is not None else []
            found = check_partials(context.fs, warehouse, spec, files, opened, deep)
            if spec.rollup.name in context.rollup_databases:  # and its rows in PostgreSQL
                whole = not any(problem.kind == "rollup_partial_missing" for problem in found)
                found += check_in_postgres(context, spec, files, open_batch, deep, whole)
            problems += found
    return problems


def _topics_not_loaded(context: JobContext, committed) -> tuple[list[dict], list[str]]:
    """The topics the job knows of but does not load, as JSON and as notices. Only they need
    Kafka: when it cannot be asked, the rest of the report stands, and says so."""
    config, kafka = context.config, context.kafka
    try:
        found = not_loaded_topics(kafka.job_topics(), {tp: c.value for tp, c in committed.items()},
                                  kafka.topics_on_broker())
    except (KafkaUnavailable, KafkaReadError) as exc:
        return [], [f"Kafka could not be asked which topics the job reads ({exc}); topics it does not load are "
                    f"not listed"]
    return ([t.to_json(config.topics_chooser) for t in found],
            [f"topic not loaded: {t.describe(config.topics_chooser)}" for t in found])


def _deep(context: JobContext, spark, inventory: Inventory, committed, events,
          inventories: dict[str, Inventory]) -> tuple[list[Problem], list[str]]:
    """Problems and notices. `inventories`: each of the job's tables' (job_tables), read with its
    rejected table as one, but those not created yet (etl.ops.verify_deep.tables_to_read)."""
    config, fs = context.config, context.fs
    broken = check_readable(fs, inventory)
    if broken:
        return broken, []  # one broken file fails every read of the table: name them, read no rows
    moved = {source for event in events for source, _ in (event.moves if isinstance(event, MovedAside) else
                                                           event.moved_aside if isinstance(event, Reset) else ())}
    # merged files' values (what no count of rows sees); which must have checksums, ZooKeeper says
    altered = check_rewritten(fs, inventory, context.store.compactions.checksummed_outputs(), moved)
    kafka, database, rejected = context.kafka, config.hive.database, config.hive.rejected_table
    found = tables_to_read(database, (*inventories, rejected), lambda table: table_exists(spark, database, table),
                           lambda table: bool(inventories[table].files if table in inventories else inventory.rejected))
    return altered + found.problems + check_deep(spark, database, found.present, inventory, committed, events,
                                                 lambda *r: offsets_in_kafka(config, kafka, *r)), found.notices
