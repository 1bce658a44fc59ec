"""`etl recover`: say what state a crash left the job in, then put it right.

It completes an open batch with exactly its recorded ranges (missing files rewritten,
partition registered, offsets committed) and deletes temp files, but only while holding the
job lock, so it never touches what a live run is doing. What it must not fix silently (a
file outside every plan, overlaps, gaps, a plan whose records Kafka no longer holds) it
reports with what the operator can do, and exits non-zero without changing anything.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from etl.batch import Batch, BatchState
from etl.config import Config
from etl.driver import Job
from etl.warehouse import Warehouse
from etl.errors import EXIT_BATCH_FAILED, EXIT_OK
from etl.fs import filesystem_for
from etl.inventory import Inventory, take_inventory
from etl.kafka_source import KafkaMetadata
from etl.naming import partition_path
from etl.verify import Problem, check_ranges
from etl.zk_store import ZkStateStore

log = logging.getLogger(__name__)

STATE_WORDS = {
    BatchState.PLANNED: "its plan is stored, but not every file was confirmed written",
    BatchState.WRITTEN: "all its files are written, but its Hive partition was not registered",
    BatchState.REGISTERED: "its files are written and registered in Hive, but its offsets were not committed",
}


@dataclass(frozen=True)
class Assessment:
    lines: list[str]
    problems: list[Problem]
    actions: list[str]
    open_batch: Batch | None


def assess(config: Config, store: ZkStateStore, kafka: KafkaMetadata, inventory: Inventory) -> Assessment:
    opened = store.open_batch()
    batch = opened[0] if opened else None
    committed = store.committed_offsets()
    problems = check_ranges(inventory, committed, batch, store.events())
    lines, actions = [], []
    if batch is None:
        last = store.last_batch()
        lines.append("no open batch: " + (f"the last batch, {last[0].batch_id}, is COMMITTED" if last
                                           else "the job has not run a batch yet"))
    else:
        missing = _missing_files(batch, inventory)
        lines += _describe_open(batch, missing)
        problems += _lost_from_kafka(batch, missing, kafka)
        actions += _open_batch_actions(batch, missing)
    if inventory.temps:
        actions.append(f"delete {len(inventory.temps)} temp files left by dead attempts")
    return Assessment(lines, problems, actions, batch)


def _missing_files(batch: Batch, inventory: Inventory) -> list:
    present = {(f.partition_path, f.range.topic, f.range.partition, f.range.start, f.range.end)
               for f in inventory.files}
    where = partition_path(batch.partition_values)
    return [r for r in batch.file_ranges if (where, r.topic, r.partition, r.start, r.end) not in present]


def _describe_open(batch: Batch, missing: list) -> list[str]:
    done = len(batch.file_ranges) - len(missing)
    return [f"batch {batch.batch_id} is open in state {batch.state.value}: {STATE_WORDS[batch.state]}.",
            f"  planned {batch.planned_at} by {batch.planned_by}",
            f"  {len(batch.file_ranges)} files planned in Hive partition {partition_path(batch.partition_values)}: "
            f"{done} in place, {len(missing)} missing"]


def _open_batch_actions(batch: Batch, missing: list) -> list[str]:
    actions = []
    if missing:
        actions.append(f"rewrite {len(missing)} missing files of batch {batch.batch_id} from Kafka, exactly their "
                       f"recorded ranges")
    if batch.state in (BatchState.PLANNED, BatchState.WRITTEN):
        actions.append(f"register Hive partition {partition_path(batch.partition_values)}")
    actions.append(f"commit the offsets of batch {batch.batch_id} ({len(batch.ranges)} partitions)")
    return actions


def _lost_from_kafka(batch: Batch, missing: list, kafka: KafkaMetadata) -> list[Problem]:
    if not missing:
        return []
    marks = kafka.watermarks(sorted({(r.topic, r.partition) for r in missing}))
    return [Problem("plan_not_in_kafka", f"{r.topic}[{r.partition}]",
                    f"batch {batch.batch_id} planned offsets [{r.start}, {r.end}) but its file is missing and Kafka "
                    f"now holds only [{marks[(r.topic, r.partition)][0]}, {marks[(r.topic, r.partition)][1]})",
                    "those records cannot be reloaded: restore the file from a backup if one exists; otherwise "
                    "accept the loss with `etl reset-offsets` past the range after the batch is resolved")
            for r in missing if r.start < marks[(r.topic, r.partition)][0]]


def recover(config: Config, dry_run: bool, out=print) -> int:
    fs = filesystem_for(config.warehouse)
    warehouse = Warehouse.of(config)
    with ZkStateStore(config.zookeeper, config.job.name, config.retry) as store:
        holder = store.lock_holder()
        if holder is not None:
            out(f"a run holds the job lock: {holder.describe()}. recover changes nothing while a run is live; "
                f"if it died, its lock disappears within {config.zookeeper.session_timeout_seconds:g}s.")
            return EXIT_OK
        kafka = KafkaMetadata(config.kafka, config.retry, config.job.name)
        try:
            inventory = take_inventory(fs, warehouse.table_root, warehouse.rejected_root)
            found = assess(config, store, kafka, inventory)
            _report(found, out)
            if found.problems or dry_run or not found.actions:
                return EXIT_BATCH_FAILED if found.problems else EXIT_OK
            return _repair(config, store, kafka, fs, inventory, found, out)
        finally:
            kafka.close()


def _report(found: Assessment, out) -> None:
    for line in found.lines:
        out(line)
    for problem in found.problems:
        out("PROBLEM " + problem.describe())
    if found.problems:
        out("nothing was changed: these need an operator's decision")
    elif found.actions:
        out("to do:")
        for action in found.actions:
            out(f"  - {action}")
    else:
        out("nothing to repair")


def _repair(config, store, kafka, fs, inventory: Inventory, found: Assessment, out) -> int:
    if store.acquire_lock() is not None:
        out("another run took the lock meanwhile; nothing was changed")
        return EXIT_OK
    try:
        for path in inventory.temps:
            fs.delete(path)
        if found.open_batch is not None:
            from etl.runner import writer_spec
            from etl.spark_session import build_spark
            job = Job(config, store, kafka, writer_spec(config), lambda: build_spark(config))
            summary = job.run_once()
            out(f"done: {summary.describe()}")
        out(f"done: deleted {len(inventory.temps)} temp files" if inventory.temps else "done")
    finally:
        store.release_lock()
    return EXIT_OK
