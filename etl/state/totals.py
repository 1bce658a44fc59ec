"""What the job has loaded since its first commit, kept beside its committed offsets.

`<job>/totals` holds the running sums of every committed LOAD batch: batches, Kafka offsets
covered, rows written, rows rejected, late rows (event time) and the bytes of the batches'
files. The commit moves them in the same fenced transaction that moves the offsets
(etl.state.batches), over the version it read, so a batch counts exactly once: a commit that
aborts moves neither, a commit replayed after a crash finds its batch already COMMITTED and
moves nothing again. The metrics export them as counters (etl.ops.metrics), which never go
down while the job's ZooKeeper state lives, so that PromQL's increase() gives rows per day
whatever the runs' schedule.

A REPAIR batch rewrites files of offsets already loaded: it adds nothing. Bytes are added
only when the run measured them ([metrics] set, etl.ops.metrics): `bytes_since` says from
when the bytes sum is complete.
"""
from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, replace

from kazoo.exceptions import NoNodeError

from etl.model.batch import Batch, BatchKind, utc_now_iso
from etl.state.session import SessionBound

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoadTotals:
    batches: int = 0
    offsets: int = 0  # Kafka offsets the batches covered
    rows: int = 0
    rejected: int = 0
    late: int = 0  # rows written into partitions already due their _SUCCESS
    bytes: int = 0  # of the batches' data files, counted since `bytes_since`
    since: str = ""  # the first commit that counted
    bytes_since: str = ""  # the first commit whose bytes were measured

    def after(self, batch: Batch, written_bytes: int | None) -> "LoadTotals":
        """The totals once `batch` is committed; `written_bytes`: None when not measured."""
        if batch.kind is not BatchKind.LOAD:
            return self
        now = utc_now_iso()
        moved = replace(self, batches=self.batches + 1, offsets=self.offsets + batch.record_count,
                        rows=self.rows + (batch.rows or 0), rejected=self.rejected + (batch.rejected or 0),
                        late=self.late + batch.event_time.late_rows,
                        since=self.since or now)
        if written_bytes is None:
            return moved
        return replace(moved, bytes=self.bytes + written_bytes, bytes_since=self.bytes_since or now)

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, data: bytes | None) -> "LoadTotals":
        """An empty or missing node is no load yet; unknown keys (a newer version's) are kept out."""
        if not data:
            return cls()
        raw = json.loads(data)
        return cls(**{key: raw[key] for key in cls.__dataclass_fields__ if key in raw})


class TotalsRecords(SessionBound):
    """The load totals, read by the metrics and moved by the commit's transaction."""

    def load_totals(self) -> tuple[LoadTotals, int | None]:
        """The totals and their node's version; None: no batch has been counted yet."""
        try:
            data, stat = self._read(lambda: self.client.get(self.paths.totals), "read the load totals")
        except NoNodeError:
            return LoadTotals(), None
        try:
            return LoadTotals.from_bytes(data), stat.version
        except (ValueError, TypeError) as exc:
            # Counters, not offsets: a damaged node must not stop the loads. They restart from
            # zero (Prometheus's increase() reads a counter reset as one), and this says so.
            log.warning("%s is not readable (%s): the load totals restart from zero at the next commit",
                        self.paths.totals, exc)
            return LoadTotals(), stat.version

    def move_totals(self, txn, batch: Batch, written_bytes: int | None) -> None:
        """Add to `txn` the totals after `batch`, written over the version read here."""
        totals, version = self.load_totals()
        moved = totals.after(batch, written_bytes)
        if version is None:
            txn.create(self.paths.totals, moved.to_bytes())
        else:
            txn.set_data(self.paths.totals, moved.to_bytes(), version=version)
