"""Which files `etl recover` moves out of the tables before it rewrites their ranges from Kafka,
and when it must not (etl.ops.recovery).

A range is rewritten whole: every file of it goes first (main parts in every table, its rejected
file, its manifest), or its rewrite would clash with them or load its records twice. A merged
file (etl.compaction.merge) holds several ranges, so moving it takes every one of them out of the
tables: each is rewritten in the same repair, its own files moved with it, until no range to
rewrite has a file left. A range taken along that Kafka no longer holds refuses the repair
before anything moves (`merged_not_in_kafka`), naming the merged file and the ranges.
"""
from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from etl.model.batch import Batch, OffsetRange
from etl.model.naming import FileRange, partition_values
from etl.ops.coverage import Problem, Span
from etl.ops.inventory import Inventory


@dataclass(frozen=True)
class Moves:
    """The files `etl recover` moves out of the tables, and why each range of theirs goes."""
    paths: list[str]
    shared: dict[str, list[FileRange]]  # each moved file that holds several ranges (merged) -> its ranges
    pulled: frozenset[FileRange]  # ranges intact but for sharing a moved file: rewritten too, never lost


def files_to_move(inventory: Inventory, unreadable: set[str], batch: Batch | None,
                  damaged: AbstractSet[str] = frozenset(), stale: AbstractSet[FileRange] = frozenset()) -> Moves:
    """Every file of a range that is rewritten whole: a range with an unreadable file, or whose
    parts do not match its manifest (`damaged`, by file name; etl.ops.parts), or whose rejected
    records a move took out (`stale`: etl.ops.rejected_moves), all its files go, main parts,
    rejected file and manifest. Also rejected files whose main files are all gone (their range is
    rewritten, rejected rows included, so the old ones must leave the table), unless an open batch
    is still writing them. Files are matched by range, not by folder: by event time a range's
    files sit in several partitions, a split topic's in several tables.

    A merged file (etl.compaction.merge) holds several ranges: moving it takes all of them out,
    so each of them is rewritten whole too, its other files moved with it, and so on until no
    range to rewrite has a file left in the tables."""
    planned = {r.file_range for r in batch.file_ranges} if batch else set()
    by_range: dict[FileRange, list[str]] = {}
    by_path: dict[str, list[FileRange]] = {}
    for f in inventory.files + inventory.rejected:
        by_range.setdefault(f.range, []).append(f.path)
        by_path.setdefault(f.path, []).append(f.range)
    main = {f.range for f in inventory.files}
    seeds = {r for r, paths in by_range.items()
             if r not in planned
             and (set(paths) & unreadable or r.stem in damaged
                  or r not in main or r in stale)}
    ranges, todo = set(), list(seeds)
    while todo:
        r = todo.pop()
        if r in ranges or r in planned:
            continue
        ranges.add(r)
        todo += [other for path in by_range.get(r, []) for other in by_path[path]]
    moving = set(unreadable) | {path for r in ranges for path in by_range.get(r, [])}
    moving |= {inventory.manifests[r] for r in ranges if r in inventory.manifests}
    shared = {path: sorted(set(by_path[path]), key=_order) for path in sorted(moving)
              if len(set(by_path.get(path, []))) > 1}
    return Moves(sorted(moving), shared, frozenset(ranges - seeds))


def _order(r: FileRange) -> tuple:
    return r.topic, r.partition, r.incarnation, r.start, r.end


def merged_not_in_kafka(moves: Moves, lost: list[Span]) -> list[Problem]:
    """A merged file is moved only when every range it holds can be rewritten: a range that was
    intact but for sharing the file, and that Kafka no longer holds, would leave the tables with it
    (--accept-loss does not apply: nothing of it was lost yet)."""
    def gone(r: FileRange) -> bool:
        return r in moves.pulled and any((s.topic, s.partition, s.incarnation) == (r.topic, r.partition, r.incarnation)
                                         and s.lo < r.end and r.start < s.hi for s in lost)
    problems = []
    for path, ranges in moves.shared.items():
        missing = [r for r in ranges if gone(r)]
        if missing:
            problems.append(Problem(
                "merged_not_in_kafka", path, f"a merged file that holds a range to rewrite, and other ranges, of which "
                f"Kafka no longer holds "
                f"{', '.join(f'{r.topic}[{r.partition}] [{r.start}, {r.end})' for r in missing[:5])}"
                f": moving it out would take their rows out of the tables for good, so nothing was moved",
                "restore the lost or broken file of the range to rewrite from a backup; recover then has nothing to "
                "rewrite. Otherwise the damage cannot be repaired without losing those ranges' rows: leave the tables "
                "as they are (`etl verify` keeps naming it) and decide with the data's owners"))
    return problems


def origins_of(inventory: Inventory, planning_time: bool) -> dict[FileRange, str]:
    """The Hive partition each range was written into, for its rewrite to go back there: its
    rejected file's (a batch's planning-time partition, by event time too), else by planning time
    its main file's. A range with neither left (a file deleted by hand) has none."""
    found = {f.range: f.partition_path for f in inventory.files} if planning_time else {}
    return found | {f.range: f.partition_path for f in inventory.rejected}


def repair_batches(spans: list[Span], origins: dict[FileRange, str], cap: int,
                   committed: dict[tuple[str, int], int]) -> list[tuple[dict[str, str] | None, list[OffsetRange]]]:
    """The REPAIR batches that rewrite `spans`: one per partition its ranges came from (`origins`),
    so that no row moves to another partition (one whose `_SUCCESS` was written, say), and one
    into the repair's own planning-time partition (None) for offsets whose partition is not known.
    A known range is rewritten with its own bounds, each piece at most `cap` offsets; each expects
    its partition's committed offset not to move until the repair commits."""
    grouped: dict[str | None, list[OffsetRange]] = {}
    for span in spans:
        for lo, hi, origin in _pieces(span, origins):
            expected = committed[(span.topic, span.partition)]
            grouped.setdefault(origin, []).extend(OffsetRange(span.topic, span.partition, start, min(start + cap, hi),
                                                              expected, span.incarnation)
                                                  for start in range(lo, hi, cap))
    return [(None if origin is None else partition_values(origin), ranges)
            for origin, ranges in sorted(grouped.items(), key=lambda item: (item[0] is None, item[0] or ""))]


def _pieces(span: Span, origins: dict[FileRange, str]) -> list[tuple[int, int, str | None]]:
    """`span` cut at the bounds of the ranges whose partition is known, each piece with it."""
    known = sorted((r.start, r.end, origin) for r, origin in origins.items()
                   if (r.topic, r.partition, r.incarnation) == (span.topic, span.partition, span.incarnation)
                   and r.start < span.hi and span.lo < r.end)
    pieces: list[tuple[int, int, str | None]] = []
    cursor = span.lo
    for start, end, origin in known:
        start, end = max(start, cursor), min(end, span.hi)
        if start >= end:
            continue
        if cursor < start:
            pieces.append((cursor, start, None))
        pieces.append((start, end, origin))
        cursor = end
    if cursor < span.hi:
        pieces.append((cursor, span.hi, None))
    return pieces
