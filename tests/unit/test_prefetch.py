"""Reading ahead on a thread: order, errors where they happened, bounded, closed on early stop."""
from __future__ import annotations

import threading
import time

import pytest

from etl.source.prefetch import prefetched


class Source:
    """A generator-like iterator that records how far it was pulled and whether it was closed."""

    def __init__(self, n: int, fail_at: int | None = None):
        self.n, self.fail_at = n, fail_at
        self.pulled = 0
        self.closed = threading.Event()

    def __iter__(self):
        return self

    def __next__(self):
        if self.pulled == self.fail_at:
            raise ValueError(f"broken at {self.pulled}")
        if self.pulled >= self.n:
            raise StopIteration
        self.pulled += 1
        return self.pulled - 1

    def close(self):
        self.closed.set()


def _wait_until(predicate, seconds=5.0):
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError
        time.sleep(0.01)


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
    source = Source(100)
    items = prefetched(source, depth=2)
    assert next(items) == 0
    time.sleep(0.3)  # time enough for the thread to read ahead as far as it may
    # one taken, two queued, and one read that waits for room in the queue
    assert source.pulled == 4
    items.close()


def test_stopping_early_stops_the_thread_and_closes_the_source():
    source = Source(10_000)
    items = prefetched(source, depth=2)
    for item in items:
        if item == 5:
            break
    items.close()
    assert source.closed.is_set()
    pulled = source.pulled
    time.sleep(0.2)
    assert source.pulled == pulled < 20


def test_a_caller_exception_closes_the_source_and_propagates():
    source = Source(10_000)
    with pytest.raises(RuntimeError, match="writer failed"):
        for item in prefetched(source):
            if item == 3:
                raise RuntimeError("writer failed")
    _wait_until(source.closed.is_set)
