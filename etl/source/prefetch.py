"""Read ahead: run an iterator on a thread of its own, a bounded number of items ahead.

A task reads Kafka, then decodes and writes what it read. Reading waits on the broker,
decoding and writing on the CPU, and both release the GIL for their heavy parts
(librdkafka's consume, Arrow's JSON reader and Parquet writer), so one task can do both at
once. The queue bound keeps memory at `depth` chunks whatever the range's size.
"""
from __future__ import annotations

import logging
import queue
import threading
from typing import Iterator, TypeVar

T = TypeVar("T")
log = logging.getLogger(__name__)

_POLL_SECONDS = 0.1
_END = object()


class _Failed:
    def __init__(self, error: BaseException):
        self.error = error


def prefetched(items: Iterator[T], depth: int = 2, name: str = "prefetch") -> Iterator[T]:
    """Yield what `items` yields, in order, computed up to `depth` items ahead.

    An exception in `items` is raised here, at the item where it happened. When the caller
    stops early (break, exception, close), the thread stops and `items` is closed, so its
    own clean-up (closing a consumer) runs before this generator returns.
    """
    handoff: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    thread = threading.Thread(target=_fill, args=(items, handoff, stop), name=name, daemon=True)
    thread.start()
    try:
        while True:
            item = handoff.get()
            if item is _END:
                return
            if isinstance(item, _Failed):
                raise item.error
            yield item
    finally:
        stop.set()
        thread.join()


def _fill(items: Iterator[T], handoff: queue.Queue, stop: threading.Event) -> None:
    outcome: object = _END
    try:
        for item in items:
            if not _put(handoff, item, stop):
                break
    except BaseException as exc:  # noqa: BLE001 -- handed to the reader, who raises it
        outcome = _Failed(exc)
    try:
        _close(items)  # before the end is handed over: the caller's clean-up is done when it returns
    except BaseException as exc:  # noqa: BLE001 -- as above
        outcome = outcome if isinstance(outcome, _Failed) else _Failed(exc)
    if stop.is_set():
        if isinstance(outcome, _Failed):  # the reader has gone and cannot raise it: say it at least
            log.warning("%s: failed after its reader stopped: %r", threading.current_thread().name,
                        outcome.error)
        return
    _put(handoff, outcome, stop)


def _close(items: Iterator[T]) -> None:
    close = getattr(items, "close", None)
    if close is not None:
        close()


def _put(handoff: queue.Queue, item, stop: threading.Event) -> bool:
    """Hand `item` over; False when the reader has stopped and nobody will take it."""
    while not stop.is_set():
        try:
            handoff.put(item, timeout=_POLL_SECONDS)
            return True
        except queue.Full:
            continue
    return False
