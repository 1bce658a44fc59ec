"""librdkafka's consumer as a pack's consumer (etl.source.reused.PackConsumer) sees it, for unit
tests of what the pack holds and hands out: the first consume() hands out every message given,
later ones nothing, and assignments are taken and ignored. Never a stand-in for a broker in a
pipeline test (tests/integration/test_kafka_source.py reads packs from the real one)."""
from __future__ import annotations


class HandedOut:
    def __init__(self, messages: list):
        self.messages = messages

    def consume(self, num_messages: int, timeout: float) -> list:
        handed, self.messages = self.messages, []
        return handed

    def incremental_assign(self, partitions) -> None:
        pass

    def incremental_unassign(self, partitions) -> None:
        pass
