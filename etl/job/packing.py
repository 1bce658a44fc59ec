"""Which of a batch's ranges one Spark task runs.

A Spark task costs tens of milliseconds on its own (the Python worker's round trip, the task's
serialisation), which a range of a few records never earns back: a topic of many quiet
partitions would spend its batch starting tasks. So small ranges share a task, and each range
still becomes its own file, written under a temp name and renamed on its own, exactly as when it
has a task to itself: a task only runs its ranges one after the other. A range of
`records_per_task` records or more keeps a task of its own, as does every range when that is 1.

Small ranges are spread over at least as many tasks as the cluster has slots (so that a batch of
quiet partitions still uses every core) and at least total / records_per_task tasks, largest
range first onto the least loaded task, which keeps the tasks even. A pack is a list of indices
into the batch's ranges, in the ranges' order, so that a plan is packed the same way every time.
"""
from __future__ import annotations

import heapq
import math
from typing import Callable, Sequence, TypeVar

from etl.source.reused import PackedRead, reusing_consumers

T = TypeVar("T")
R = TypeVar("R")


def pack_ranges(sizes: Sequence[int], records_per_task: int, slots: int) -> list[list[int]]:
    """`sizes`: each range's planned record count (until - from). Returns the tasks as lists of
    range indices; every index is in exactly one list."""
    alone = [[i] for i, size in enumerate(sizes) if size >= records_per_task]
    small = [i for i, size in enumerate(sizes) if size < records_per_task]
    if not small:
        return alone
    total = sum(sizes[i] for i in small)
    count = min(len(small), max(math.ceil(total / records_per_task), slots, 1))
    bins: list[tuple[int, int, list[int]]] = [(0, b, []) for b in range(count)]
    for i in sorted(small, key=lambda i: (-sizes[i], i)):
        load, b, members = heapq.heappop(bins)
        members.append(i)
        heapq.heappush(bins, (load + sizes[i], b, members))
    packed = [sorted(members) for _, _, members in sorted(bins, key=lambda entry: entry[1])]
    return alone + packed


def packed(items: Sequence[T], sizes: Sequence[int], records_per_task: int, slots: int) -> list[list[T]]:
    """`items` (one per range, as `sizes`) grouped into tasks by pack_ranges."""
    return [[items[i] for i in pack] for pack in pack_ranges(sizes, records_per_task, slots)]


def run_each(call: Callable[[T], R], pack: list[T], reads: Callable[[T], PackedRead] | None = None) -> list[R]:
    """A task's ranges one after the other, each written and renamed on its own by `call`; the
    ranges of a pack of several share a Kafka consumer (etl.source.reused), assigned at once to
    the partitions `reads` names for them."""
    if len(pack) == 1:
        return [call(pack[0])]
    with reusing_consumers([reads(item) for item in pack] if reads else ()):
        return [call(item) for item in pack]
