"""One Kafka consumer for the small ranges that one Spark task reads one after the other
(etl.job.packing).

Creating a librdkafka consumer costs about 5 ms, more than reading a range of a few records: a
task of a hundred such ranges spent most of its time there. Within `reusing_consumers()`, the
ranges of a task share one consumer per set of settings (one per consumer group), assigned to
each range's partition in turn. Its fetches wait at most REUSED_FETCH_WAIT_MS at the end of a log
(librdkafka's default is 500 ms): the assignment of the next range's partition otherwise waited
for the fetch still in flight for the last one, about half a second a range. A [kafka]
fetch.wait.max.ms wins.
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator

from confluent_kafka import Consumer

REUSED_FETCH_WAIT_MS = "10"
_REUSED: contextvars.ContextVar[dict | None] = contextvars.ContextVar("etl_reused_consumers", default=None)


@contextlib.contextmanager
def reusing_consumers() -> Iterator[None]:
    """Ranges read in this block (in this thread) share consumers; all closed at its end."""
    consumers: dict = {}
    token = _REUSED.set(consumers)
    try:
        yield
    finally:
        _REUSED.reset(token)
        for consumer in consumers.values():
            consumer.close()


def reused_consumer(settings: dict) -> Consumer | None:
    """The block's consumer for `settings`, made on first use; None outside reusing_consumers()."""
    consumers = _REUSED.get()
    if consumers is None:
        return None
    key = tuple(sorted((name, str(value)) for name, value in settings.items()))
    if key not in consumers:
        consumers[key] = Consumer({"fetch.wait.max.ms": REUSED_FETCH_WAIT_MS, **settings})
    return consumers[key]
