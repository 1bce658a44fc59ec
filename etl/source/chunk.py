"""What the source yields: consecutive records of one partition, in offset order."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from confluent_kafka import Message

from etl.errors import KafkaReadError


@dataclass(frozen=True)
class RawChunk:
    """Consecutive records of one partition, as the Kafka reader yields them, in offset order."""

    offsets: list[int]
    timestamps_ms: list[int]  # CreateTime or LogAppendTime; negative when the broker has none
    keys: list[bytes | None] | None  # None when keys are not configured
    values: list[bytes | None]
    # Each record's headers as Kafka gives them, in order, names repeating (None: it has none);
    # None when no header column is configured.
    headers: list[list[tuple[str, bytes | None]] | None] | None = None

    def __post_init__(self):
        lengths = {len(self.offsets), len(self.timestamps_ms), len(self.values)}
        for optional in (self.keys, self.headers):
            if optional is not None:
                lengths.add(len(optional))
        if len(lengths) > 1:
            raise KafkaReadError(
                f"chunk has {len(self.offsets)} offsets, {len(self.timestamps_ms)} timestamps, "
                f"{len(self.values)} values, {'no' if self.keys is None else len(self.keys)} keys and "
                f"{'no' if self.headers is None else len(self.headers)} header lists; "
                "the Kafka reader must yield one of each per record (this is a bug in the reader)"
            )

    def __len__(self) -> int:
        return len(self.offsets)

    def take(self, indices: Sequence[int]) -> "RawChunk":
        """The records at `indices` (ascending: offset order is kept), as a chunk of their own."""
        def pick(items):
            return None if items is None else [items[i] for i in indices]
        return RawChunk([self.offsets[i] for i in indices], [self.timestamps_ms[i] for i in indices], pick(self.keys),
                        [self.values[i] for i in indices], pick(self.headers))


def chunk_of(messages: list, with_keys: bool, with_headers: bool) -> RawChunk:
    """Kafka's records (consecutive, of one partition) as a chunk."""
    return RawChunk(
        offsets=list(map(Message.offset, messages)),
        timestamps_ms=[timestamp for _, timestamp in map(Message.timestamp, messages)],
        keys=list(map(Message.key, messages)) if with_keys else None,
        values=list(map(Message.value, messages)),
        headers=list(map(Message.headers, messages)) if with_headers else None,
    )
