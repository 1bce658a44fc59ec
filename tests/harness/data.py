"""Test data: JSON events, produced and remembered."""
from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from pathlib import Path
from typing import Callable

from tests.harness.oracle import ends_of


def event(i: int, ts: str = "2026-11-21 10:00:00") -> bytes:
    return json.dumps({"event_id": i, "user_id": f"u{i % 7}", "action": "click", "amount": i / 10,
                       "ts": ts, "ok": i % 2 == 0}).encode()


def spread_event(i: int) -> bytes:
    """An event whose ts wanders over 30 hours, out of order: under partition_by = column:ts a
    range's rows fall in many hourly partitions, across midnight."""
    at = dt.datetime(2026, 11, 20, 12) + dt.timedelta(minutes=(i * 7919) % (30 * 60))
    return event(i, at.strftime("%Y-%m-%d %H:%M:%S"))


def action_spread_event(i: int) -> bytes:
    """spread_event's time, and every third record a click (the rest views): for a topic split
    among tables by its action."""
    body = json.loads(spread_event(i))
    return json.dumps({**body, "action": "click" if i % 3 == 0 else "view"}).encode()


def events_by_partition(partitions: int, per_partition: int, first_id: int = 0) -> dict[int, list[bytes]]:
    return {p: [event(first_id + p * per_partition + i) for i in range(per_partition)] for p in range(partitions)}


def loaded_job(new_topic, produce, write_config, partitions=2, per_partition=50, **sections) -> tuple[str, Path]:
    """A new topic with `per_partition` events in each partition, loaded by one run of the job
    that write_config(**sections) describes: (topic, config path)."""
    from etl.config import load_config
    from etl.ops.run import run_job

    topic = new_topic(partitions=partitions)
    produce(topic, events_by_partition(partitions, per_partition))
    config = write_config(kafka={"topics": topic}, **sections)
    assert run_job(load_config(config)) == 0
    return topic, config


class DataSource:
    """Produces JSON events to one topic and remembers every delivered (topic, partition, offset)."""

    def __init__(self, topic: str, partitions: int, produce: Callable, make_event: Callable[[int], bytes] = event):
        self.topic, self.partitions, self._produce, self._event = topic, partitions, produce, make_event
        self.produced: Counter = Counter()
        self._next_id = 0

    def produce(self, per_partition: int | dict) -> int:
        counts = per_partition if isinstance(per_partition, dict) else {p: per_partition
                                                                        for p in range(self.partitions)}
        values = {}
        for p, n in counts.items():
            values[p] = [self._event(self._next_id + i) for i in range(n)]
            self._next_id += n
        delivered = self._produce(self.topic, values)
        for p, offset in delivered:
            self.produced[(self.topic, p, offset)] += 1
        return len(delivered)

    @property
    def expected(self) -> Counter:
        return Counter({k: 1 for k in self.produced})

    def ends(self) -> dict:
        return ends_of(self.produced)


class TopicsSource:
    """DataSource's interface over several topics: each `produce` goes to every one of them."""

    def __init__(self, sources: list[DataSource]):
        self.sources = sources

    def produce(self, per_partition: int) -> int:
        return sum(source.produce(per_partition) for source in self.sources)

    @property
    def produced(self) -> Counter:
        return sum((source.produced for source in self.sources), Counter())

    @property
    def expected(self) -> Counter:
        return Counter({k: 1 for k in self.produced})

    def ends(self) -> dict:
        return ends_of(self.produced)
