"""`etl recover`: say what state a crash or a mistake left the job in, then put it right.

It completes an open batch with exactly its recorded ranges (missing files rewritten,
partition registered, offsets committed), deletes temp files, moves files whose Parquet footer
cannot be read out of the table (etl.sink.aside), and rewrites every committed range that no file
covers (a file deleted by hand, or moved out as broken) from Kafka, as a REPAIR batch, while
Kafka still holds it, into the partition it came from. A merged file it moves takes every range
it holds along, each rewritten in the same repair, or nothing moves (etl.ops.repair_moves); a range
whose rejected records an earlier recover moved out is rewritten whole (etl.ops.rejected_moves).
All of it only while holding the job lock, so it never touches what a live run is doing. What it
must not fix silently (a file outside every plan, overlaps, offsets Kafka no longer holds) it
reports with what the operator can do, and exits non-zero without changing anything. It only
shows what it would do unless given --execute (etl.ops.acting). A gap
Kafka no longer holds can be recorded as lost with --accept-loss, after which `etl verify`
accepts it.
"""
from __future__ import annotations

import getpass
import logging
from dataclasses import dataclass, field
from typing import Mapping

from etl.compaction.run import compactor_of
from etl.config import Config
from etl.context.job import JobContext
from etl.errors import EXIT_BATCH_FAILED, EXIT_OK
from etl.job.pending_reset import finish_pending_reset
from etl.job.positions import recreated_partitions
from etl.model.shape import shape_of
from etl.job.write_mode import mode_of
from etl.model.batch import Batch, BatchState, OffsetRange, utc_now_iso
from etl.model.compaction import CompactionState
from etl.model.events import AcceptedLoss, MovedAside
from etl.model.naming import FileRange, partition_path
from etl.ops.acting import Act, stops_at_preview
from etl.ops.coverage import Problem, Span, check_ranges, walk_partitions
from etl.model.partitioning import padded_path
from etl.ops.inventory import Inventory
from etl.ops.job_tables import JobInventory, held_by_job
from etl.ops.legacy_names import legacy_partitions, move_legacy_partitions
from etl.ops.parts import damaged_ranges
from etl.ops.repair_moves import files_to_move, merged_not_in_kafka, origins_of, repair_batches
from etl.ops.rejected_moves import stale_ranges
from etl.ops.verify_deep import unreadable_files
from etl.ops.rollup_files import orphan_partials, partials_of
from etl.sink.aside import aside_path, aside_root, move_aside
from etl.sink.fs import WarehouseFileSystem
from etl.sink.warehouse import Warehouse
from etl.source.kafka import KafkaMetadata
from etl.state.protocols import OffsetPart, OperatorPart, StateStore

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
    moving: list[str]  # files to move out of the table before their ranges are rewritten
    rewrite: list[Span]  # committed ranges no file covers, that Kafka still holds
    lost: list[Span]  # committed ranges no file covers, that Kafka no longer holds (with --accept-loss)
    legacy: list[str] = field(default_factory=list)  # partitions named before dt was zero-padded
    origins: dict[FileRange, str] = field(default_factory=dict)  # the partition each range to rewrite came from


def assess(config: Config, store: StateStore, kafka: KafkaMetadata, held: JobInventory, fs: WarehouseFileSystem,
           warehouse: Warehouse, accept_loss: bool = False) -> Assessment:
    """`held`: what the job's tables hold (etl.ops.job_tables); `warehouse`: the table's folders
    as the config names them (without relocations)."""
    opened = store.batches.open_batch()
    batch = opened[0] if opened else None
    committed, events, inventory = store.offsets.committed_offsets(), store.operator.events(), held.whole
    damaged = damaged_ranges(held.part_problems(batch))
    stale = stale_ranges(fs, warehouse, inventory, committed, events)
    moves = files_to_move(inventory, {path for path, _ in unreadable_files(fs, inventory)}, batch, damaged, stale)
    moved = set(moves.paths)
    staying = _without(inventory, moved)
    # each moved file's rollup partials go with it, and any partial of no file (etl.ops.rollup_files)
    located = warehouse.with_relocations(store.compactions.relocations())  # partials move with compactions
    unfinished = {r.file_range for r in batch.file_ranges} if batch is not None else set()
    moving = moves.paths + sorted(set(
        partials_of(fs, located, config.rollups, [f for f in inventory.files if f.path in moved])
        + orphan_partials(fs, located, config.rollups, inventory.files, unfinished)))
    problems = [p for p in check_ranges(staying, committed, batch, events) if p.kind != "gap"]
    lines, actions = [], []
    if batch is None:
        last = store.batches.last_batch()
        lines.append("no open batch: " + (f"the last batch, {last[0].batch_id}, is COMMITTED" if last
                                           else "the job has not run a batch yet"))
    else:
        missing = _missing_files(batch, inventory)
        lines += _describe_open(batch, missing)
        problems += _lost_from_kafka(batch, missing, kafka)
        actions += _open_batch_actions(batch, missing)
    if store.operator.pending_reset() is not None:
        actions.insert(0, "finish the offset reset that a dead `etl reset-offsets` left half done")
    actions[:0] = [f"finish {plan.describe()}" for plan, _ in store.compactions.open_compactions()
                   if plan.state is not CompactionState.SWITCHED]
    if inventory.temps:
        actions.append(f"delete {len(inventory.temps)} temp files left by dead attempts")
    if stale:
        actions.append(f"rewrite whole {len(stale)} ranges whose rejected records an earlier `etl recover` moved out "
                       f"of the table (`etl verify`: missing_rejected)")
    if moving:
        actions.append(f"move {len(moving)} files out of the table (unreadable, or a file of a range to rewrite): "
                       f"{', '.join(moving[:3])}")
    if moves.shared:
        actions.append(f"rewrite every range of the {len(moves.shared)} merged files it moves, so that none leaves "
                       f"the tables: " + ", ".join(f"{path} ({len(ranges)} ranges)"
                                                    for path, ranges in list(moves.shared.items())[:3]))
    gaps = [gap for walk in walk_partitions(staying, committed, batch, events) for gap in walk.gaps]
    rewrite, lost = _split_by_kafka(gaps, kafka, store.offsets, committed) if gaps else ([], [])
    problems += _without_table(config, kafka, rewrite) + merged_not_in_kafka(moves, lost)
    if rewrite:
        actions.append(f"rewrite {len(rewrite)} committed ranges that no file covers, from Kafka, into the partitions "
                       f"they came from: "
                       f"{', '.join(_describe(s) for s in rewrite[:5])}")
    legacy = [path for table in shape_of(config).legacy_named(warehouse) for path in legacy_partitions(fs, table)]
    if legacy:
        actions.append(f"move {len(legacy)} partitions named before dt was zero-padded to their padded names: "
                       f"{', '.join(f'{p} -> {padded_path(p)}' for p in legacy[:5])}")
    if lost and accept_loss:
        actions.append(f"record {len(lost)} ranges as lost: {', '.join(_describe(s) for s in lost[:5])}")
    elif lost:
        problems += [_lost(s) for s in lost]
    origins = origins_of(inventory, config.hive.partitioning.event_column is None)
    return Assessment(lines, problems, actions, batch, moving, rewrite, lost, legacy, origins)


def _without(inventory: Inventory, paths: set[str]) -> Inventory:
    return Inventory([f for f in inventory.files if f.path not in paths],
                     [f for f in inventory.rejected if f.path not in paths], inventory.temps,
                     {r: path for r, path in inventory.manifests.items() if path not in paths})


def _split_by_kafka(gaps: list[Span], kafka: KafkaMetadata, store: OffsetPart,
                    committed) -> tuple[list[Span], list[Span]]:
    """Each gap split at the earliest offset Kafka still holds: what can be rewritten, what is lost.
    A recreated topic holds none of the committed records any more, whatever its offsets say, nor
    does a deleted one, and Kafka holds none of an incarnation the partition left (etl.model.identity):
    its gaps are lost, never rewritten from the new topic."""
    on_broker = kafka.topics_on_broker()
    marks = kafka.watermarks(sorted({(g.topic, g.partition) for g in gaps if g.topic in on_broker}))
    recreated = recreated_partitions(store, kafka, committed, marks, kafka.topic_ids(sorted({t for t, _ in marks})),
                                     with_new_data_only=False)
    rewrite, lost = [], []
    for g in gaps:
        key = (g.topic, g.partition)
        gone = key in recreated or key not in marks or g.incarnation != committed[key].incarnation
        low = g.hi if gone else marks[key][0]
        if g.lo < low:
            lost.append(Span(g.topic, g.partition, g.lo, min(low, g.hi), None, g.incarnation))
        if g.hi > low:
            rewrite.append(Span(g.topic, g.partition, max(g.lo, low), g.hi, None, g.incarnation))
    return rewrite, lost


def _without_table(config: Config, kafka: KafkaMetadata, rewrite: list[Span]) -> list[Problem]:
    """A routed job rewrites a range into the tables its topic's routes give it now (a topic moved
    by `etl bind --move-loaded`: its new ones): a topic no route takes any more has none."""
    if not rewrite:
        return []
    tableless = shape_of(config).without_table({s.topic for s in rewrite}, lambda: kafka.job_topics().tables)
    return [Problem("no_table", topic, "committed ranges of this topic are in no file, and no route gives the topic a "
                    "table to rewrite them into (a route retired by `etl bind --stop-loading`, or one it cannot "
                    "take)", "route the topic to its table again, `etl bind`, then `etl recover`")
            for topic in tableless]


def _describe(span: Span) -> str:
    return f"{span.where} [{span.lo}, {span.hi})"


def _lost(span: Span) -> Problem:
    return Problem("lost", _describe(span), "committed offsets that no file covers, and Kafka no longer holds "
                   "them (retention or a recreated topic)",
                   "restore the files from a backup if there is one; otherwise record the loss with "
                   "`etl recover --accept-loss`, after which `etl verify` accepts the gap")


class _InventoryFiles:
    """What the inventory found, as the write mode's range-done check asks it (etl.job.write_mode)."""

    def __init__(self, inventory: Inventory):
        self.manifests = inventory.manifests
        self.present = {(f.partition_path, f.range) for f in inventory.files}

    def has_file(self, values: Mapping[str, str], r: OffsetRange) -> bool:
        return (partition_path(dict(values)), r.file_range) in self.present

    def has_manifest(self, r: OffsetRange) -> bool:
        return r.file_range in self.manifests


def _missing_files(batch: Batch, inventory: Inventory) -> list:
    return mode_of(batch).missing(batch, _InventoryFiles(inventory))


def _describe_open(batch: Batch, missing: list) -> list[str]:
    done = len(batch.file_ranges) - len(missing)
    where = ("ranges planned by event time (done: its manifest is published)" if mode_of(batch).by_event_time
             else f"files planned in Hive partition {partition_path(batch.partition_values)}")
    return [f"batch {batch.batch_id} is open in state {batch.state.value}: {STATE_WORDS[batch.state]}.",
            f"  planned {batch.planned_at} by {batch.planned_by}",
            f"  {len(batch.file_ranges)} {where}: {done} in place, {len(missing)} missing"]


def _open_batch_actions(batch: Batch, missing: list) -> list[str]:
    actions = []
    if missing:
        actions.append(f"rewrite {len(missing)} missing files of batch {batch.batch_id} from Kafka, exactly their "
                       f"recorded ranges")
    if batch.state in (BatchState.PLANNED, BatchState.WRITTEN):
        actions.append("register the Hive partitions the batch touched" if mode_of(batch).by_event_time
                       else f"register Hive partition {partition_path(batch.partition_values)}")
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


@dataclass(frozen=True)
class RecoverOptions:
    """`etl recover`'s command line: whether it acts, and whether committed ranges that no file
    covers and Kafka no longer holds are recorded as lost (--accept-loss)."""
    act: Act = Act.PREVIEW
    accept_loss: bool = False


def recover(config: Config, options: RecoverOptions, out=print, report: dict | None = None) -> int:
    """`report`, when given, receives what was found as JSON (`etl recover --json`)."""
    # The batch it completes and the reset it finishes move offsets: the store mirrors them to Kafka.
    with JobContext(config, moves_offsets=True, runs_batches=True) as context:
        return recover_in(context, options, out, report)


def recover_in(context: JobContext, options: RecoverOptions, out=print, report: dict | None = None) -> int:
    config, store, report = context.config, context.store, {} if report is None else report
    holder = store.session.lock_holder()
    if holder is not None:
        report["lock"] = holder.describe()
        out(f"a run holds the job lock: {holder.describe()}. recover changes nothing while a run is live; "
            f"if it died, its lock disappears within {config.zookeeper.session_timeout_seconds:g}s.")
        return EXIT_OK
    held = held_by_job(context.fs, config, store, context.located())
    inventory = held.whole
    found = assess(config, store, context.kafka, held, context.fs, context.warehouse, options.accept_loss)
    report.update(assessment_json(found))
    _report(found, out)
    if found.problems:
        return EXIT_BATCH_FAILED
    if not found.actions:
        return EXIT_OK
    if stops_at_preview(options.act, out):
        return EXIT_OK
    return _repair(context, inventory, found, out)


def assessment_json(found: Assessment) -> dict:
    return {"open_batch": None if found.open_batch is None else found.open_batch.batch_id,
            "findings": found.lines, "problems": [p.to_json() for p in found.problems], "actions": found.actions,
            "rewrite": [_describe(s) for s in found.rewrite], "lost": [_describe(s) for s in found.lost],
            "move_out": found.moving, "legacy_partitions": found.legacy}


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


def _repair(context: JobContext, inventory: Inventory, found: Assessment, out) -> int:
    config, store, fs, warehouse = context.config, context.store, context.fs, context.warehouse
    if store.session.acquire_lock() is not None:
        out("another run took the lock meanwhile; nothing was changed")
        return EXIT_OK
    try:
        finish_pending_reset(store.operator, fs, out)
        for path in inventory.temps:
            fs.delete(path)
        if found.moving:
            _move_out(store.operator, fs, warehouse, config.job.name, found.moving, out)
        job = context.job()
        compactor_of(context).finish_pending()  # before a batch: it must write where Hive reads
        if found.open_batch is not None:
            out(f"done: {job.run_once().describe()}")
        if found.legacy:  # after the open batch: it may register some of them
            located, registrar = context.located(), context.registrar()
            registrar.warehouse = located  # a padded partition that was compacted is registered where it is now
            move_legacy_partitions(fs, located, registrar, out)
        if found.lost:
            _record_losses(store.operator, found.lost, out)
        if found.rewrite:
            committed = {key: offset.value for key, offset in store.offsets.committed_offsets().items()}
            for planned, ranges in repair_batches(found.rewrite, found.origins, config.job.max_records_per_partition,
                                                  committed):
                out(f"done: {job.repair(ranges, planned).describe()}")
        out(f"done: deleted {len(inventory.temps)} temp files" if inventory.temps else "done")
    finally:
        store.session.release_lock()
    return EXIT_OK


def _move_out(store: OperatorPart, fs: WarehouseFileSystem, warehouse: Warehouse, job_name: str, paths: list[str],
              out) -> None:
    at = utc_now_iso()
    root = aside_root(warehouse.fs_root, job_name, at)
    moves = [(path, aside_path(warehouse.fs_root, root, path)) for path in paths]
    move_aside(fs, moves)
    store.record_event(MovedAside(at, getpass.getuser(), "etl recover", tuple(moves)))
    out(f"done: moved {len(moves)} files out of the table, to {root}")


def _record_losses(store: OperatorPart, lost: list[Span], out) -> None:
    at, user = utc_now_iso(), getpass.getuser()
    for span in lost:
        store.record_event(AcceptedLoss(at, user, span.topic, span.partition, committed=span.lo, restart_at=span.hi))
    out(f"done: recorded {len(lost)} ranges as lost: {', '.join(_describe(s) for s in lost[:5])}")
