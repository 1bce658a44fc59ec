"""What a rollup's database holds of the job's offsets, and the rows it is handed: plain values,
without the client (etl.postgres.rollup_db), so that a job with no target never imports it."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import pyarrow as pa

Partition = tuple[str, int]  # (topic, partition)


@dataclass(frozen=True)
class Position:
    next_offset: int
    batch_id: int  # the batch whose transaction moved it there


@dataclass(frozen=True)
class OffsetMove:
    topic: str
    partition: int
    start: int | None  # None: the database holds no offset of this partition yet
    end: int


def as_rows(table: pa.Table) -> list[tuple]:
    """Merged groups as the upsert takes them: a timestamp in UTC without a zone, as the
    rollup's `timestamp` columns hold it."""
    columns = [[_utc_naive(value) for value in column.to_pylist()] for column in table.columns]
    return list(zip(*columns))


def _utc_naive(value):
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return value
