"""Reading ahead on a thread: order, errors where they happened, bounded, closed on early stop.

No test sleeps and then counts: the source checks the read-ahead bound at every read it is
asked for, and the tests wait on events and conditions (with a timeout that only a hang hits).
"""
from __future__ import annotations

import threading

import pytest

from etl.source.prefetch import prefetched

HANG = 5.0  # seconds; only a broken prefetch waits this long


class Source:
    """A generator-like iterator that records how far it was pulled, whether it was closed and
    whether any read ran further ahead of the caller than the bound allows."""

    def __init__(self, n: int, fail_at: int | None = None, depth: int | None = None):
        self.n, self.fail_at, self.depth = n, fail_at, depth
        self.pulled = 0
        self.asked = 0  # items the caller has asked for (counted before it asks)
        self.too_far: list[tuple[int, int]] = []  # (item read, items asked for) past the bound
        self.changed = threading.Condition()
        self.closed = threading.Event()

    def __iter__(self):
        return self

    def __next__(self):
        if self.pulled == self.fail_at:
            raise ValueError(f"broken at {self.pulled}")
        if self.pulled >= self.n:
            raise StopIteration
        with self.changed:
            # Item k is read only after item k-1 was queued, and the queue holds at most
            # `depth`, so k <= items taken + depth <= items asked for + depth.
            if self.depth is not None and self.pulled > self.asked + self.depth:
                self.too_far.append((self.pulled, self.asked))
            self.pulled += 1
            self.changed.notify_all()
        return self.pulled - 1

    def take(self, items):
        """The caller's next(items), counted as asked for before it asks."""
        with self.changed:
            self.asked += 1
        return next(items)

    def wait_pulled(self, count: int) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: self.pulled >= count, timeout=HANG), self.pulled

    def close(self):
        self.closed.set()


def _alive(name: str) -> bool:
    return any(thread.name == name for thread in threading.enumerate())


def test_yields_everything_in_order_and_closes_the_source_before_the_end():
    source = Source(1000)
    assert list(prefetched(source, depth=3)) == list(range(1000))
    assert source.closed.is_set()


def test_an_error_is_raised_after_the_items_before_it():
    source = Source(10, fail_at=4)
    seen = []
    with pytest.raises(ValueError, match="broken at 4"):
        for item in prefetched(source):
            seen.append(item)
    assert seen == [0, 1, 2, 3]
    assert source.closed.is_set()


def test_it_reads_at_most_depth_items_ahead_of_the_caller():
    source = Source(100, depth=2)
    items = prefetched(source, depth=2)
    assert source.take(items) == 0
    # one taken, two queued, and one read that waits for room in the queue: the thread gets
    # this far whatever the timing, and any read further would be recorded in too_far
    source.wait_pulled(4)
    assert source.too_far == []
    for expected in range(1, 100):  # and the bound holds at every read until the end
        assert source.take(items) == expected
    assert source.too_far == []
    items.close()


def test_stopping_early_stops_the_thread_and_closes_the_source():
    source = Source(10_000)
    items = prefetched(source, depth=2, name="prefetch-stopped-early")
    for item in items:
        if item == 5:
            break
    items.close()
    # close() joins the thread: nothing can read from the source any more
    assert not _alive("prefetch-stopped-early")
    assert source.closed.is_set()
    assert source.pulled < 20


def test_a_caller_exception_closes_the_source_and_propagates():
    source = Source(10_000)
    with pytest.raises(RuntimeError, match="writer failed"):
        for item in prefetched(source):
            if item == 3:
                raise RuntimeError("writer failed")
    assert source.closed.wait(HANG)
