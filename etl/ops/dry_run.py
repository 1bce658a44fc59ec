"""`etl run --dry-run`: the batch a run would load now, and where it would write, with nothing
touched.

It reads what the driver plans from (etl.job.positions, etl.model.planner) and writes nothing:
no lock is taken (so it runs beside a run, and shows what that run would do next had it not
started), no ZooKeeper node is created or changed, no Spark, no Hive call, no file. An open
batch comes first, as a run completes it with exactly its recorded ranges; otherwise the new
batch. Its target partitions are known before reading where the table is partitioned by load
time (the hour of planning, as of now); by event time they are known only once the rows are
read, except for an open batch whose files were all written.

What the run refuses before it plans, the dry run refuses too, with the same error (the same
message and exit code), by the same checks in the same order: an open batch planned for other
tables, a config that differs from what the job is bound to (etl.model.route_binding), and a
topic with committed offsets that the routes can no longer load (etl.job.batch_tables).
"""
from __future__ import annotations

import datetime as dt
from typing import Callable

from etl.config import Config
from etl.context.job import JobContext
from etl.job.batch_tables import refuse_lost_topics
from etl.model.batch import Batch, OffsetRange
from etl.model.route_binding import check_job_binding, check_planned
from etl.model.naming import partition_path
from etl.model.partitioning import Placement
from etl.model.planner import plan_ranges
from etl.job.positions import planning_positions
from etl.job.write_mode import WriteMode, configured_mode, mode_of
from etl.sink.warehouse import Warehouse

# `etl run --dry-run` and its JSON name the mode by this key (tests and operators read it).
DRY_RUN_KEY = "by_event_time"
EVENT_TIME_TARGET = "known only after reading: the rows' event times decide their partitions"


def dry_run(config: Config) -> dict:
    with JobContext(config, create_nodes=False) as context:
        return preview(context)


def preview(context: JobContext) -> dict:
    """dry_run in the command's context: an open batch is shown without asking Kafka."""
    config, store, kafka = context.config, context.store, context.kafka
    started = context.job_started()  # not before the job's first command: then nothing is committed
    warehouse = context.located() if started else context.warehouse
    opened = store.batches.open_batch() if started else None
    if started:
        _refuse_as_the_run_does(context, opened[0] if opened else None)
    shown = context.shape.preview_folders(warehouse)
    if opened is not None:
        return {**_head(context, "complete_open_batch"), **_open_batch(opened[0], shown)}
    chosen = kafka.job_topics()
    if started:
        refuse_lost_topics(chosen, lambda: {topic for topic, _ in store.offsets.committed_offsets()}, config)
    topics = chosen.loaded
    positions, _ = planning_positions(store.offsets, kafka, topics)
    plan = plan_ranges(positions, config.job)  # OffsetOutOfRange here is the run's own refusal
    high = {(p.topic, p.partition): p.high for p in positions}
    tables = {t: list(routed.tables) for t, routed in chosen.tables.topics.items()} if chosen.tables else {}
    return {**_head(context, "new_batch" if plan.ranges else "nothing_to_do"), "topics": list(topics),
            "ranges": [_range(r, high[(r.topic, r.partition)], tables) for r in plan.ranges],
            "skipped": [s.describe() for s in plan.skipped], "waiting": [p.describe() for p in plan.waiting],
            "target": _new_target(context, shown, context.clock()) if plan.ranges else None}


def _refuse_as_the_run_does(context: JobContext, opened: Batch | None) -> None:
    """etl.job.driver.Job.run_once's checks before it plans: an open batch resumed into the tables
    it was planned for, and the config naming what the job is bound to (a job not bound yet is
    bound by its first run, which refuses nothing here)."""
    config, store = context.config, context.store
    current = context.shape.binding(context.warehouse)
    if opened is not None:
        check_planned(opened, current, config)
    bound = store.operator.binding()
    if bound is not None:
        check_job_binding(bound, current, config, lambda: {topic for topic, _ in store.offsets.committed_offsets()})


def _head(context: JobContext, action: str) -> dict:
    config = context.config
    return {"event": "dry_run", "job": config.job.name, "action": action,
            "table": f"{config.hive.database}.{context.shape.describe_tables()}"}


def _range(r: OffsetRange, latest: int, tables: dict[str, list[str]]) -> dict:
    """One range as the plan stores it: [from, until), and what Kafka holds past it (a later
    batch of the same run loads that, [job] max_records_per_partition at a time); a routed
    job's ranges also name their tables."""
    return {"topic": r.topic, "partition": r.partition, "from": r.start, "until": r.end, "records": r.size,
            "committed": r.expected, "left_after": max(0, latest - r.end),
            **({"tables": tables[r.topic]} if r.topic in tables else {})}


def _new_target(context: JobContext, warehouse: Warehouse | None, now: dt.datetime) -> dict:
    partitioning = context.config.hive.partitioning

    def planned() -> dict[str, str]:  # the DDL is read only where the target is known before the rows
        return Placement.of(partitioning, context.partitioner, now, None).planned
    return new_plan_target(configured_mode(partitioning), planned, warehouse)


def new_plan_target(mode: WriteMode, planned: Callable[[], dict[str, str]], warehouse: Warehouse | None) -> dict:
    """Where a new plan writes: by planning time `planned()`'s partition, by event time unknown yet."""
    if mode.by_event_time:
        return {DRY_RUN_KEY: True, "partitions": None, "detail": EVENT_TIME_TARGET}
    return {DRY_RUN_KEY: False, "partitions": [_partition(warehouse, planned())],
            "detail": "the hour it is planned in: now"}


def _open_batch(batch: Batch, warehouse: Warehouse | None) -> dict:
    ranges = [{"topic": r.topic, "partition": r.partition, "from": r.start, "until": r.end, "records": r.size,
               "committed": r.expected, **({"tables": batch.tables[r.topic]} if r.topic in batch.tables else {})}
              for r in batch.ranges]
    return {"batch_id": batch.batch_id, "kind": batch.kind.value, "state": batch.state.value,
            "planned_by": batch.planned_by, "ranges": ranges, "target": open_batch_target(batch, warehouse)}


def open_batch_target(batch: Batch, warehouse: Warehouse | None) -> dict:
    """Where an open batch writes: its plan's partition, or by event time those its WRITTEN recorded."""
    if not mode_of(batch).by_event_time:
        return {DRY_RUN_KEY: False, "partitions": [_partition(warehouse, batch.partition_values)],
                "detail": "recorded in the batch's plan"}
    touched = mode_of(batch).recorded_partitions(batch)
    if touched is None:
        return {DRY_RUN_KEY: True, "partitions": None, "detail": EVENT_TIME_TARGET}
    return {DRY_RUN_KEY: True, "detail": "recorded when the batch's files were written",
            "partitions": [{**_partition(warehouse, part.partition), **({"table": part.table} if part.table else {})}
                           for part in touched]}


def _partition(warehouse: Warehouse | None, values: dict[str, str] | str) -> dict:
    """`warehouse`: the one table's; None for a routed job, whose partition is in each table's folder."""
    name = values if isinstance(values, str) else partition_path(values)
    return {"partition": name, "folder": warehouse.main_dir(values) if warehouse else f"<each table's folder>/{name}"}


def render(preview: dict) -> str:
    lines = [f"DRY RUN: job {preview['job']} into {preview['table']}; nothing was changed (no lock taken, no "
             f"ZooKeeper node written, no Spark, no Hive call, no file)"]
    action = preview["action"]
    if action == "nothing_to_do":
        return "\n".join([*lines, f"nothing to do: no new records in {', '.join(preview['topics']) or 'no topic'}",
                          *[f"would skip lost offsets: {s}" for s in preview["skipped"]],
                          *[f"waits: {w}" for w in preview["waiting"]]])
    if action == "complete_open_batch":
        lines.append(f"would complete batch {preview['batch_id']} ({preview['kind']}, left {preview['state']} by "
                     f"{preview['planned_by']}) with its recorded ranges; new batches are planned after it commits")
    else:
        lines.append(f"would plan a new batch of {len(preview['ranges'])} ranges, "
                     f"{sum(r['records'] for r in preview['ranges'])} offsets:")
    lines.append(f"  {'topic':<30} {'part':>4} {'from':>12} {'until':>12} {'records':>10}")
    lines += [f"  {r['topic']:<30} {r['partition']:>4} {r['from']:>12} {r['until']:>12} {r['records']:>10}"
              + (f"  -> {', '.join(r['tables'])}" if "tables" in r else "") for r in preview["ranges"]]
    left = sum(r.get("left_after", 0) for r in preview["ranges"])
    if left:
        lines.append(f"  then {left} more offsets in later batches of the same run (max_records_per_partition)")
    lines += [f"would skip lost offsets: {s}" for s in preview.get("skipped", ())]
    lines += [f"waits: {w}" for w in preview.get("waiting", ())]
    target = preview["target"]
    if target["partitions"] is None:
        lines.append(f"target partitions: {target['detail']}")
    else:
        lines += [f"target partition: {p['partition']} at {p['folder']} ({target['detail']})"
                  for p in target["partitions"]]
    return "\n".join(lines)
