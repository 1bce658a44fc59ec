"""`etl reset-offsets`: an operator moves committed offsets on purpose, on the record.

Refused while a run holds the lock or a batch is open (the open plan would no longer match
the offsets). Every reset is stored in ZooKeeper as an event with time, user, old and new
offsets; `etl status` lists them and `etl verify` accepts the gaps they explain.

Backwards never duplicates. A reset to an offset inside a committed file is refused (a file
is loaded whole). A reset backwards over committed files is refused, unless --move-aside moves
those files (and their rejected companions) out of the table in the same recorded operation:
the plan is written to ZooKeeper first, then the files are moved, then the offsets move in one
fenced transaction with the event. A run that dies in between is finished by the next
`reset-offsets`, `recover` or `run`. A reset also accepts the topic as it is now: the topic ids
are stored anew and the last-record fingerprints dropped (etl.model.identity).

The new offsets are named (TOPIC:PARTITION=OFFSET), or the log's `earliest` or `latest`, or
found by time (--to-datetime): each partition's first offset whose record's timestamp is at or
after it (Kafka's offsets_for_times), and its end, as `latest`, where it holds no such record.
Whatever the target, the same guards apply. Once the offsets moved in ZooKeeper, the store
mirrors them to the job's Kafka consumer group (etl.source.group_mirror).
"""
from __future__ import annotations

import getpass
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from etl.config import Config
from etl.context.job import JobContext
from etl.errors import EXIT_OK, ConfigError, Refused, RefusedUntilDone
from etl.job.pending_reset import finish_pending_reset
from etl.model.batch import utc_now_iso
from etl.model.events import OffsetChange, PendingReset, Reset
from etl.ops.acting import Act, stops_at_preview
from etl.ops.inventory import Inventory
from etl.ops.job_tables import held_by_job
from etl.ops.rollup_files import partials_of
from etl.ops.rollup_postgres import moved_under, rebuild_in_postgres, table_files
from etl.sink.aside import aside_path, aside_root
from etl.source.kafka import KafkaMetadata
from etl.state.protocols import OffsetPart

_EXPLICIT = re.compile(r"^(?P<topic>[A-Za-z0-9._-]+):(?P<partition>\d+)=(?P<offset>\d+)$")
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
Targets = str | dict[tuple[str, int], int] | datetime  # earliest or latest; offsets by partition; a time


def parse_instant(raw: str) -> datetime:
    """--to-datetime's value: an ISO 8601 time that says its zone, Z or an offset (+01:00); a
    time without one is refused rather than guessed, since the machine's zone and UTC differ by
    hours of records. Raises ValueError with the reason."""
    try:
        when = datetime.fromisoformat(raw.strip())
    except ValueError:
        raise ValueError(f"{raw!r} is not an ISO 8601 time such as 2026-11-25T14:30:00Z") from None
    if when.utcoffset() is None:
        raise ValueError(f"{raw!r} has no time zone: end it with Z for UTC, or an offset such as +01:00")
    if when < EPOCH:
        raise ValueError(f"{raw!r} is before 1970-01-01T00:00:00Z, where Kafka's timestamps start")
    return when


def epoch_ms(when: datetime) -> int:
    """Kafka's timestamp (milliseconds) of the first record that is at or after `when`: a
    fraction of a millisecond rounds up, or a record stamped just before `when` would count."""
    return -(-(when - EPOCH) // timedelta(milliseconds=1))


def parse_targets(to: list[str] | str | datetime) -> Targets:
    """--to's values (a list), or --to-datetime's (a string, or a datetime already read)."""
    if isinstance(to, datetime):
        return to
    if isinstance(to, str):
        try:
            return parse_instant(to)
        except ValueError as exc:
            raise ConfigError(f"--to-datetime: {exc}") from None
    if to in (["earliest"], ["latest"]):
        return to[0]
    targets = {}
    for item in to:
        match = _EXPLICIT.match(item)
        if not match:
            raise ConfigError(f"--to {item!r}: use earliest, latest, or TOPIC:PARTITION=OFFSET (repeatable)")
        targets[(match["topic"], int(match["partition"]))] = int(match["offset"])
    return targets


def plan_changes(config: Config, store: OffsetPart, kafka: KafkaMetadata, targets) -> list[OffsetChange]:
    topics = kafka.job_topics().loaded
    partitions = kafka.partitions(topics)
    marks = kafka.watermarks(partitions)
    committed = store.committed_offsets()
    wanted = _wanted(kafka, partitions, marks, targets)
    changes = []
    for (topic, partition), new in sorted(wanted.items()):
        if (topic, partition) not in marks:
            raise ConfigError(f"{topic}[{partition}] is not a partition of the topics the job reads "
                              f"({', '.join(topics) or 'none'}, chosen by {config.topics_chooser})")
        low, high = marks[(topic, partition)]
        if not low <= new <= high:
            raise ConfigError(f"{topic}[{partition}]: offset {new} is outside what Kafka holds, [{low}, {high}]")
        old = committed.get((topic, partition))
        changes.append(OffsetChange(topic, partition, old.value if old else None, new))
    return changes


def _wanted(kafka: KafkaMetadata, partitions: list[tuple[str, int]], marks: dict, targets: Targets) -> dict:
    if isinstance(targets, dict):
        return targets
    if isinstance(targets, datetime):
        found = kafka.offsets_at(partitions, epoch_ms(targets))
        # No record at or after the time: the partition's end, as `latest` (what comes next is loaded).
        return {tp: marks[tp][1] if found.get(tp) is None else found[tp] for tp in partitions}
    return {tp: marks[tp][0 if targets == "earliest" else 1] for tp in partitions}


@dataclass(frozen=True)
class ResetOptions:
    """`etl reset-offsets`'s command line: where to, whether it acts, and whether a backwards reset
    moves the files it would load again out of the table (--move-aside)."""
    targets: Targets
    act: Act = Act.PREVIEW
    move_aside: bool = False
    rebuild_rollups: bool = False  # a rollup kept in PostgreSQL, moved back under: made again (etl.ops.rollup_postgres)


def reset_offsets(config: Config, options: ResetOptions, out=print, report: dict | None = None) -> int:
    """`report`, when given, receives the changes, refusals and moves as JSON (`--json`)."""
    with JobContext(config, moves_offsets=True) as context:
        return reset_in(context, options, out, report)


def reset_in(context: JobContext, options: ResetOptions, out=print, report: dict | None = None) -> int:
    """reset_offsets in the command's context."""
    store, report = context.store, {} if report is None else report
    holder = store.session.acquire_lock()
    if holder is not None:
        report["lock"] = holder.describe()
        raise RefusedUntilDone(f"a run holds the job lock ({holder.describe()}); try again when it has finished")
    try:
        finish_pending_reset(store.operator, context.fs, out)
        return _reset_locked(context, options, out, report)
    finally:
        store.session.release_lock()


def _reset_locked(context: JobContext, options: ResetOptions, out, report: dict) -> int:
    config, store, targets = context.config, context.store, options.targets
    opened = store.batches.open_batch()
    if opened:
        report["open_batch"] = opened[0].batch_id
        raise RefusedUntilDone(f"batch {opened[0].batch_id} is open ({opened[0].state.value}); run "
                               f"`etl recover --execute` first")
    kafka = context.kafka
    changes = plan_changes(config, store.offsets, kafka, targets)
    topic_ids = kafka.topic_ids(sorted({c.topic for c in changes}))
    warehouse, fs = context.located(), context.fs
    inventory = held_by_job(fs, config, store, warehouse).whole  # a routed job's every table
    current = {key: c.incarnation for key, c in store.offsets.committed_offsets().items()}
    refusals, moving = _backwards(changes, inventory, options.move_aside, current)
    # each moved range's rollup partials go with it (etl.ops.rollup_files)
    moved = set(moving)
    moving += partials_of(fs, warehouse, config.rollups, [f for f in inventory.files if f.path in moved])
    report.update(changes=[{**c.__dict__, "backwards": c.old is not None and c.new < c.old} for c in changes],
                  refusals=refusals, move_out=moving, applied=False)
    if isinstance(targets, datetime):
        report["to_datetime"] = targets.isoformat()
        out(f"--to-datetime {targets.isoformat()}: each partition's first offset whose record's timestamp is at or "
            f"after it, or its end where it holds none")
    for c in changes:
        out(f"{c.topic}[{c.partition}]: {c.old} -> {c.new}"
            f"{'  (backwards)' if c.old is not None and c.new < c.old else ''}")
    under = moved_under(context, changes)
    report["rollups_moved_under"] = [spec.rollup.name for spec, _, _ in under]
    if not options.rebuild_rollups:
        refusals += [why for _, _, why in under]
    if refusals:
        raise Refused(*refusals)
    at = utc_now_iso()
    root = aside_root(warehouse.fs_root, config.job.name, at)
    moves = [(path, aside_path(warehouse.fs_root, root, path)) for path in moving]
    for source, target in moves:
        out(f"move out of the table: {source} -> {target}")
    if stops_at_preview(options.act, out):
        return EXIT_OK
    event = Reset(at, getpass.getuser(), tuple(changes), tuple(moves))
    store.operator.write_pending_reset(PendingReset(event, topic_ids))
    finish_pending_reset(store.operator, fs, out)
    for spec, table, _ in under:  # from the files the reset left in the table
        out(rebuild_in_postgres(context, spec, table_files(context, table)))
    report["applied"] = True
    return EXIT_OK


def _backwards(changes: list[OffsetChange], inventory: Inventory, move_aside: bool,
               current: dict[tuple[str, int], str] | None = None) -> tuple[list[str], list[str]]:
    """What a backwards reset must refuse, and the files it moves out of the table: every
    committed file (its parts in every partition, its rejected companion, its manifest) at or
    after the new offset, so that the
    offsets are loaded again exactly once. An offset inside a file is always refused. Only the
    files of each partition's `current` incarnation (etl.model.identity) count: a recreated
    topic's earlier incarnations hold other records at the same offsets."""
    refusals, moving = [], []
    files = inventory.files + inventory.rejected
    for c in changes:
        if c.old is None or c.new >= c.old:
            continue
        tag = (current or {}).get((c.topic, c.partition), "")
        mine = [f for f in files
                if (f.range.topic, f.range.partition, f.range.incarnation) == (c.topic, c.partition, tag)]
        inside = [f for f in mine if f.range.start < c.new < f.range.end]
        # Each file once: a merged file (etl compact) is in the inventory once per range it holds.
        after = sorted({f.path for f in mine if f.range.start >= c.new})
        # By event time the range's manifest goes with its files, or the reload would be refused
        # as a clash (and its files taken for done).
        after += sorted({inventory.manifests[f.range] for f in mine
                         if f.range.start >= c.new and f.range in inventory.manifests})
        where = f"{c.topic}[{c.partition}] -> {c.new}"
        split = sorted({f.path for f in mine if f.range.start < c.new} & set(after))
        if split:  # a compacted file holds ranges on both sides: moving it would lose the earlier ones
            held = [f.range for f in mine if f.path == split[0]]
            refusals.append(f"{where} falls between the ranges of the compacted file {split[0]}, which holds "
                            f"offsets [{min(r.start for r in held)}, {max(r.end for r in held)}): reset to one of "
                            f"those two offsets instead (a file is loaded or reloaded whole)")
        elif inside:
            refusals.append(f"{where} is inside {inside[0].path}, which holds offsets [{inside[0].range.start}, "
                            f"{inside[0].range.end}): reset to {inside[0].range.start} or {inside[0].range.end} "
                            f"instead (a file is loaded or reloaded whole)")
        elif after and not move_aside:
            refusals.append(f"{where} is backwards over {len(after)} committed files (e.g. {after[0]}): loading "
                            f"them again would put their records in the table twice. Pass --move-aside to move "
                            f"them out of the table (kept under _etl_moved_aside) in the same operation")
        moving += after
    return refusals, sorted(set(moving))
