"""Which committed offsets the warehouse's files cover: the checks `etl verify` and `etl recover`
share, pure functions of an inventory and ZooKeeper's state.

Every Kafka partition with a committed offset is walked, whether or not any file of it is
found: its files must tile [origin, committed), where the origin is the first offset the job
planned for it. A gap is accepted only where ZooKeeper records why (a skip, a reset, an
accepted loss). Each problem found carries what the operator can do about it.

A partition of a recreated topic is walked once per incarnation the job loaded of it
(etl.model.identity): each incarnation's files, told apart by their names' tags, must tile the
offsets ZooKeeper records it committed, [origin, end), apart from the others'. A recorded skip,
reset or loss explains the same offsets in every incarnation of its partition.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from etl.model.batch import Batch
from etl.model.events import Event, explained_jumps
from etl.model.identity import Incarnation
from etl.model.naming import FileRange
from etl.ops.inventory import Inventory, WarehouseFile
from etl.sink.warehouse import same_location
from etl.state.znodes import CommittedOffset

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


@dataclass(frozen=True)
class Span:
    """Offsets [lo, hi) of one Kafka partition that must be in the table: a committed file's
    range, or a gap (file None) that no file covers and no record explains."""

    topic: str
    partition: int
    lo: int
    hi: int
    file: WarehouseFile | None
    incarnation: str = ""  # the topic's incarnation whose offsets these are (etl.model.identity)

    @property
    def where(self) -> str:
        return describe_partition(self.topic, self.partition, self.incarnation)


def check_ranges(inventory: Inventory, committed: dict[tuple[str, int], CommittedOffset],
                 open_batch: Batch | None, events: list[Event]) -> list[Problem]:
    problems = []
    for walk in walk_partitions(inventory, committed, open_batch, events):
        problems += walk.problems
    problems += _check_rejected(inventory, _planned(open_batch))
    return problems


@dataclass(frozen=True)
class PartitionWalk:
    spans: list[Span]
    problems: list[Problem]

    @property
    def gaps(self) -> list[Span]:
        return [s for s in self.spans if s.file is None]


def walk_partitions(inventory: Inventory, committed: dict[tuple[str, int], CommittedOffset],
                    open_batch: Batch | None, events: list[Event]) -> list[PartitionWalk]:
    """Every Kafka partition with a committed offset or a file, walked from where the job started
    reading it (ZooKeeper's record, not the first file found) to its committed offset."""
    jumps, planned, by_partition = explained_jumps(events), _planned(open_batch), inventory.by_partition()
    return [_walk(key, by_partition.get(key, []), committed.get(key), planned, jumps, set(inventory.manifests))
            for key in sorted(set(by_partition) | set(committed))]


def _planned(open_batch: Batch | None) -> set[FileRange]:
    return {r.file_range for r in open_batch.file_ranges} if open_batch else set()


def describe_partition(topic: str, partition: int, incarnation: str = "") -> str:
    return f"{topic}[{partition}]" + (f" (incarnation {incarnation})" if incarnation else "")


def _walk(key, files: list[WarehouseFile], offset: CommittedOffset | None, planned, jumps,
          manifested=frozenset()) -> PartitionWalk:
    """Each incarnation of the partition walked over its own files; files of an incarnation
    ZooKeeper records no offsets of are named."""
    if offset is None:
        return _walk_incarnation(key, files, None, planned, jumps, manifested)
    spans, problems = [], []
    known = {i.tag for i in offset.incarnations}
    for incarnation in offset.incarnations:
        walk = _walk_incarnation(key, [f for f in files if f.range.incarnation == incarnation.tag], incarnation,
                                 planned if incarnation.tag == offset.incarnation else set(), jumps, manifested)
        spans += walk.spans
        problems += walk.problems
    problems += [_unknown_incarnation(f) for f in files if f.range.incarnation not in known]
    return PartitionWalk(spans, problems)


def _walk_incarnation(key, files: list[WarehouseFile], offset: Incarnation | None, planned, jumps,
                      manifested) -> PartitionWalk:
    topic, partition = key
    tag = "" if offset is None else offset.tag
    where = describe_partition(topic, partition, tag)
    committed = None if offset is None else offset.end
    # By event time one range has a file in each partition it touched, and a manifest: walked once
    # (etl.ops.parts checks its parts against the manifest). Without a manifest a second file of a
    # range is a copy: an overlap.
    loaded, walked = [], set()
    for f in files:
        if committed is not None and f.range.end <= committed and not (f.range in manifested and f.range in walked):
            loaded.append(f)
            walked.add(f.range)
    problems = [_uncovered(where, f, committed) for f in files
                if (committed is None or f.range.end > committed) and f.range not in planned]
    if offset is None or committed is None:
        return PartitionWalk([], problems)
    # A job state written before origins were recorded: start at the first file, as before.
    origin = offset.origin if offset.origin is not None else (loaded[0].range.start if loaded else committed)
    spans, cursor, previous = [], origin, None
    for f in loaded:
        r = f.range
        if r.start < cursor:
            problems.append(_overlap(where, previous, f, cursor) if previous else _before_origin(where, f, origin))
        for lo, hi in unexplained(topic, partition, cursor, r.start, jumps):
            spans.append(Span(topic, partition, lo, hi, None, tag))
            problems.append(_gap(where, lo, hi, previous, f))
        spans.append(Span(topic, partition, r.start, r.end, f, tag))
        cursor, previous = max(cursor, r.end), f
    for lo, hi in unexplained(topic, partition, cursor, committed, jumps):
        spans.append(Span(topic, partition, lo, hi, None, tag))
        problems.append(_gap(where, lo, hi, previous, None))
    return PartitionWalk(spans, problems)


def _unknown_incarnation(f: WarehouseFile) -> Problem:
    where = describe_partition(f.range.topic, f.range.partition, f.range.incarnation)
    return Problem("uncovered_file", where, f"{f.path} is of an incarnation of the topic that ZooKeeper records no "
                   f"committed offsets of", "it was not written by this job's current state (a copied file, another "
                   "job writing to the same table?): move it out of the warehouse after checking where it came from")


def unexplained(topic: str, partition: int, lo: int, hi: int, jumps) -> list[tuple[int, int]]:
    """The parts of [lo, hi) that no recorded jump of the committed offset skipped. A jump covers
    its own offsets only: a gap that also holds deleted files' offsets is partly unexplained."""
    pieces = []
    for start, end in sorted((a, b) for t, p, a, b in jumps if (t, p) == (topic, partition) and a < b):
        if end <= lo or start >= hi:
            continue
        if start > lo:
            pieces.append((lo, start))
        lo = max(lo, end)
    if lo < hi:
        pieces.append((lo, hi))
    return pieces


def _gap(where: str, lo: int, hi: int, before: WarehouseFile | None, after: WarehouseFile | None) -> Problem:
    around = (f"between {before.path} and {after.path}" if before and after else
              f"after {before.path}, up to the committed offset" if before else
              f"before {after.path}, from where the job started reading" if after else
              "from where the job started reading up to the committed offset: the partition has no file at all")
    return Problem("gap", where, f"no file covers offsets [{lo}, {hi}) {around}, and ZooKeeper records no skip or "
                   f"reset there", _GAP_ACTION)


def _overlap(where: str, previous: WarehouseFile, current: WarehouseFile, cursor: int) -> Problem:
    return Problem("overlap", where, f"{previous.path} and {current.path} both cover offsets "
                   f"[{current.range.start}, {min(cursor, current.range.end)}): those records are in the table twice",
                   "move the file that should not be there (usually the later copy from a manual reset or a "
                   "restored backup) out of the warehouse, then run `etl verify` again")


def _before_origin(where: str, f: WarehouseFile, origin: int) -> Problem:
    return Problem("uncovered_file", where, f"{f.path} covers offsets [{f.range.start}, {f.range.end}), before "
                   f"offset {origin} where this job started reading the partition",
                   "it was not written by this job (another job writing to the same table, a copied file?): move "
                   "it out of the warehouse after checking where it came from")


_GAP_ACTION = ("a file was deleted or moved by hand: run `etl recover`, which rewrites the range from Kafka while "
               "Kafka still holds it; otherwise restore the file from a backup, or record the loss with "
               "`etl recover --accept-loss`")


def _uncovered(where: str, f: WarehouseFile, committed: int | None) -> Problem:
    return Problem("uncovered_file", where, f"{f.path} covers offsets [{f.range.start}, {f.range.end}) "
                   f"beyond the committed offset {committed} and belongs to no open batch plan",
                   "it was not written by this job's current state (a reset, a copied file, another job "
                   "writing to the same table?): move it out of the warehouse after checking where it came "
                   "from, or the next batch may load its records a second time")


def _check_rejected(inventory: Inventory, planned) -> list[Problem]:
    # By range, not by folder: by event time the rejected file sits in the planning-time partition
    # and the range's main files in the partitions of its rows.
    main = {f.range for f in inventory.files}
    return [Problem("orphan_rejected_file", describe_partition(f.range.topic, f.range.partition, f.range.incarnation),
                    f"{f.path} has no matching file in the main table",
                    "check whether the main file was moved by hand; restore it, or move this file out")
            for f in inventory.rejected if f.range not in main and f.range not in planned]


def check_temps(inventory: Inventory, lock_held_by: str | None) -> list[Problem]:
    if not inventory.temps or lock_held_by:
        return []  # a live run may be writing them right now
    listed = ", ".join(inventory.temps[:3])
    return [Problem("temp_file", "warehouse", f"{len(inventory.temps)} temp files left by dead attempts: {listed}",
                    "run `etl recover`, which deletes them (they are never part of the table)")]


def check_registered(inventory: Inventory, locations: dict[str, str], expected: dict[str, str],
                     open_batch: Batch | None) -> list[Problem]:
    """Every folder with committed files is a partition of the table, registered at that folder.

    `locations`: partition path -> the location the metastore holds; `expected`: partition path ->
    the location this job writes to. A partition registered elsewhere (after [warehouse] url
    changed, or by hand) hides the files the job writes: analysts would never see them."""
    planned = _planned(open_batch)
    # A folder holding only files of the open batch is registered when that batch is (by event
    # time its ranges write into many folders, not only its planning-time one).
    settled = {f.partition_path for f in inventory.files if f.range not in planned}
    missing = sorted(path for path in settled if path not in locations)
    problems = [Problem("unregistered_partition", path, "holds committed files but is not a partition of the Hive "
                        "table, so analysts do not see them",
                        "run `etl recover` (it registers the partitions of the open batch) or ALTER TABLE ... ADD "
                        "PARTITION for this directory") for path in missing]
    return problems + [
        Problem("wrong_location", path, f"the Hive partition points to {location}, but this job writes its files "
                f"to {expected[path]}: analysts do not see them",
                "if [warehouse] url was changed by mistake, change it back; otherwise point the partition at the "
                "job's folder: ALTER TABLE ... PARTITION (...) SET LOCATION '<the job's folder>'")
        for path, location in sorted(locations.items())
        if path in expected and not same_location(location, expected[path])]
