"""Finished-partition markers: `_SUCCESS` in a Hive partition's folder once no more files can land there.

Like Flink's success-file partition commit policy and Secor's finalizer. With [hive]
success_markers = true, a partition gets its marker when both hold:
  1. its time window has closed, plus [hive] success_marker_delay_seconds, by the driver's
     wall clock (UTC);
  2. every batch that touched it is COMMITTED.

The window. The table's Partitioner (etl.model.partitioning) gives each partition's time
window. By planning time it also fixes a batch's Hive partition when the batch is planned: dt
and hour of the planning time by the driver's clock, so that dt=2026-11-21/hour=10 receives the
batches planned in [10:00, 11:00) and its window closes at 11:00 (the cutoff is the driver's
clock: clock_cutoff). By event time a row goes to the partition of its own event time, and a
window is closed by the event-time watermark instead (watermark_cutoff). Which of the two a
job uses, and so which methods here it calls, is etl.job.write_mode's to say.

Why that suffices, by planning time. Batches are planned one at a time under the job lock,
each only once the one before is COMMITTED, and only a batch planned inside a window writes
into it. Once the planning clock has passed a window's end and no batch is open, nothing more can land there,
unless the planning clock goes back: another host whose clock is behind takes the lock, or a
clock is stepped back. The delay must cover that skew. A batch planned into a partition that
already has its marker is still written and committed in full (exactly once beats the
marker); it is logged as LATE DATA, recorded, and counted by `etl status`, and the marker stays.
By event time the watermark says what the job has seen, not what may still come: a row of a
window already marked can arrive in any later batch, and is late data, written or rejected as
[hive] late_data says (docs/event-time.md).

When. Only while no batch is open: right after a batch commits, and on a run with no new
data, so that a closed window gets its marker even when no further batch comes. Never before a
batch's work: a marker never holds data back, and a marker that cannot be written fails the run
only after the data is committed (the next run writes it).

The ledger. The partitions still waiting for a marker are listed in the header of the job's
newest batch in ZooKeeper (Batch.extra["markers"]). A new plan carries the newest batch's list
forward plus its own partition, so the list is stored with the plan and committed by the same
fenced transaction as the batch. A marker pass drops what it marked with one fenced update of
that header. No warehouse listing, and no znode of its own; pruning always keeps the newest
batch. (Deriving the list from the committed batch headers would not do: only the newest 50 are
kept, fewer than an hour's worth with `--loop --interval 60`.) Batches planned while markers are
off are not listed, so turning markers on covers the partitions planned from then on.

A routed job's batch lists its partition once for each table it writes (the tables it registers:
Batch.routed_tables), and each table's partition gets its own marker in its own folder, by the same
rule, through the same ledger. A table that no batch of an hour wrote to gets no marker for that
hour, as a one-table job's hour without a batch gets none (etl.sink.marker_ledger).

Writing. Under a temp name (`_tmp.<uuid>._SUCCESS`, swept and reported like a data file's temp
name), published with the same no-replace rename as the data files (etl.sink.commit.publish): a
replay after a crash finds `_SUCCESS` in place and is done. The rejected table's partition gets
its marker first, when that folder exists (an hour without a rejected record has none); the
main table's last, so the main table's marker means both partitions are final (a routed job's
tables share the job's rejected table: its marker comes before the first table's). Hive and Spark
skip names starting with `_`, and etl.ops.inventory takes neither name for a data file.
"""
from __future__ import annotations

import datetime as dt
import json
import logging
import posixpath
from dataclasses import replace
from typing import Callable, Mapping, Protocol, Sequence

from etl.config import Config, SuccessMarkerConfig
from etl.errors import WarehouseError
from etl.model.batch import Batch, BatchState, TouchedPartition
from etl.model.naming import partition_path, partition_values, temp_name
from etl.model.partitioning import Partitioner, future_bound_ms
from etl.sink.commit import publish
from etl.sink.fs import WarehouseFileSystem
from etl.sink.marker_ledger import LEDGER_KEY, Awaiting, Ledger, MarkerError, partition_key, window_of
from etl.sink.warehouse import Warehouse
from etl.state.protocols import WithBatches, WithOffsets, WithSession

log = logging.getLogger(__name__)

MARKER_NAME = "_SUCCESS"


class MarkerStore(WithSession, WithBatches, WithOffsets, Protocol):
    """The state parts the markers use: the committed offsets and the last batch they judge by,
    the amend that moves the ledger, and who writes a marker."""


class SuccessMarkers:
    """The job's markers: carries the ledger into each plan and writes the markers that are due.
    Every method does nothing when [hive] success_markers is off."""

    def __init__(self, config: Config, store: MarkerStore, fs: WarehouseFileSystem, warehouse: Warehouse,
                 partitioner: Partitioner, clock: Callable[[], dt.datetime],
                 tables_of: Callable[[Batch], Sequence[str]]):
        """`tables_of`: the tables whose partitions a batch's markers await, as the ledger names them
        (the job's shape's: etl.model.shape)."""
        self.settings: SuccessMarkerConfig = config.hive.success_markers
        self.config, self.store, self.fs, self.warehouse, self.clock = config, store, fs, warehouse, clock
        self.partitioner, self.tables_of = partitioner, tables_of
        self.idle_seconds = config.hive.partitioning.idle_partition_seconds
        self.max_future_seconds = config.hive.partitioning.max_future_seconds

    def late_before_ms(self) -> int | None:
        """For a new plan by event time (etl.job.write_mode asks only then): partitions whose
        window ends at or before this are due their marker (the watermark less the delay), so
        their rows are late. None: none is."""
        if not self.settings.enabled:
            return None
        mark = self._watermark(report=True)
        return None if mark is None else mark - int(self.settings.delay_seconds * 1000)

    def _watermark(self, report: bool = False) -> int | None:
        committed, now = self.store.offsets.committed_offsets(), self.clock()
        if report:
            for (topic, partition), offset in sorted(beyond_bound(committed, now, self.max_future_seconds).items()):
                log.warning("the latest event time committed for %s[%d], %s, is more than [hive] max_future_seconds "
                            "(%gs) ahead of now: it is left out of the event-time watermark until the partition's "
                            "next batch replaces it (stored by a release without that bound)", topic, partition,
                            _utc_text(offset.max_event_ms), self.max_future_seconds)
        return watermark(committed, now, self.idle_seconds, self.max_future_seconds)

    def _newest_ledger(self) -> Ledger:
        newest = self.store.batches.last_batch()  # COMMITTED: a batch is planned only when none is open
        return Ledger.of(newest[0] if newest else None)

    def carry(self, batch: Batch) -> Batch:
        """A new batch by event time, carrying the ledger forward: its partitions are known only
        once the files are written (on_written)."""
        if not self.settings.enabled:
            return batch
        return replace(batch, extra={**batch.extra, LEDGER_KEY: self._newest_ledger().to_json()})

    def on_plan(self, batch: Batch) -> Batch:
        """A new batch by planning time, carrying the ledger forward with its own partition; a
        partition already marked is late data: written all the same, and recorded."""
        if not self.settings.enabled:
            return batch
        tables = self.tables_of(batch)
        ledger = self._newest_ledger().adding(batch.partition_values, self.partitioner, tables)
        for table in tables:
            awaiting = Awaiting(partition_key(batch.partition_values), table)
            if self.fs.exists(posixpath.join(self._main_dir(awaiting), MARKER_NAME)):
                ledger = ledger.with_late(self._report_late(batch, awaiting))
        return replace(batch, extra={**batch.extra, LEDGER_KEY: ledger.to_json()})

    def on_written(self, batch: Batch, partitions: list[TouchedPartition]) -> dict:
        """By event time: the batch header's extra, its ledger listing every partition the batch
        touched, and each partition that received late rows recorded."""
        if not self.settings.enabled:
            return batch.extra
        ledger = Ledger.of(batch)
        for part in partitions:
            values = partition_values(part.partition)
            table = part.table  # a routed batch's: each table's partition is marked in its folder
            ledger = ledger.adding(values, self.partitioner, (table,))
            if part.late:
                ledger = ledger.with_late({"batch_id": batch.batch_id, "partition": part.partition,
                                           "rows": part.late, "planned_at": batch.planned_at,
                                           "planned_by": batch.planned_by, **({"table": table} if table else {})})
        return {**batch.extra, LEDGER_KEY: ledger.to_json()}

    def _report_late(self, batch: Batch, awaiting: Awaiting) -> dict:
        where = partition_path(batch.partition_values)
        table = awaiting.table or self.config.hive.the_table
        log.error("LATE DATA: batch %d is planned into Hive partition %s of %s.%s, whose %s marker is already "
                  "written: its files are written and committed all the same (nothing is lost or doubled), but "
                  "readers that trusted the marker miss them. This host's clock is behind the one that wrote the "
                  "marker: raise [hive] success_marker_delay_seconds (now %gs) above the clock skew between the "
                  "job's hosts", batch.batch_id, where, self.config.hive.database, table,
                  MARKER_NAME, self.settings.delay_seconds)
        return {"batch_id": batch.batch_id, "partition": where, "planned_at": batch.planned_at,
                "planned_by": batch.planned_by, **({"table": awaiting.table} if awaiting.table else {})}

    def write_due(self, cutoff: Callable[[], dt.datetime | None]) -> list[str]:
        """Mark every listed partition whose window closed by `cutoff()` (clock_cutoff or
        watermark_cutoff; None: none has), then drop them from the ledger. Returns the
        partitions marked. Only while no batch is open: the driver calls
        it after a commit and when there is nothing new, and an open batch may still add files
        to any listed partition (a late plan), so then it does nothing."""
        if not self.settings.enabled:
            return []
        newest = self.store.batches.last_batch()
        if newest is None or newest[0].state is not BatchState.COMMITTED:
            return []
        batch, version = newest
        ledger = Ledger.of(batch)
        due = self._due(ledger, cutoff)
        for awaiting in due:
            self._mark(awaiting)
        if due:
            self.store.batches.amend(batch, version, extra={**batch.extra, LEDGER_KEY: ledger.without(due).to_json()})
            log.info("%s written in %d partitions: %s", MARKER_NAME, len(due), ", ".join(a.describe() for a in due))
        return [a.describe() for a in due]

    def clock_cutoff(self) -> dt.datetime:
        """By planning time: a window is closed once the driver's clock, less the delay, is past it."""
        return self.clock() - dt.timedelta(seconds=self.settings.delay_seconds)

    def watermark_cutoff(self) -> dt.datetime | None:
        """By event time: once the watermark, less the delay, is past it; None before any event
        time is committed."""
        mark = self._watermark()
        if mark is None:
            return None
        return (dt.datetime.fromtimestamp(mark / 1000, dt.timezone.utc)
                - dt.timedelta(seconds=self.settings.delay_seconds))

    def _due(self, ledger: Ledger, cutoff: Callable[[], dt.datetime | None]) -> list[Awaiting]:
        closed_by = cutoff()
        if closed_by is None:
            return []
        return [a for a in ledger.unmarked if window_of(self.partitioner, a.values).end <= closed_by]

    def _main_dir(self, awaiting: Awaiting) -> str:
        """The folder of the partition in its table: the job's, or one of a routed job's."""
        warehouse = self.warehouse.for_table(awaiting.table) if awaiting.table else self.warehouse
        return warehouse.main_dir(awaiting.values)

    def _mark(self, awaiting: Awaiting) -> None:
        rejected = self.warehouse.rejected_dir(awaiting.values)
        if self.fs.exists(rejected):  # first: the main table's marker vouches for both
            self._publish(rejected, awaiting)
        self._publish(self._main_dir(awaiting), awaiting)

    def _publish(self, folder: str, awaiting: Awaiting) -> None:
        final = posixpath.join(folder, MARKER_NAME)
        if self.fs.exists(final):
            return  # a replay after a crash between the marker and the ledger update
        temp = posixpath.join(folder, temp_name(MARKER_NAME))
        try:
            self._write(temp, awaiting)
            publish(self.fs, temp, final)  # False: it appeared meanwhile, which is as good
        except WarehouseError as exc:
            raise MarkerError(f"cannot write {final}: {exc}. The data in it is committed; the next run writes "
                              f"the marker again") from exc

    def _write(self, temp: str, awaiting: Awaiting) -> None:
        values = awaiting.values
        body = json.dumps({"job": self.config.job.name, "partition": partition_path(values),
                           "window_end": window_of(self.partitioner, values).end.isoformat(),
                           "written_at": self.clock().isoformat(timespec="seconds"),
                           "by": self.store.session.me.describe(),
                           **({"table": awaiting.table} if awaiting.table else {})}, sort_keys=True).encode()
        try:
            with self.fs.open_write(temp) as handle:
                handle.write(body)
        except BaseException:
            self.fs.delete(temp)  # a partial temp file is never published; do not leave it behind either
            raise


def watermark(committed: Mapping, now: dt.datetime, idle_seconds: float,
              max_future_seconds: float | None = None) -> int | None:
    """The job's event-time watermark (ms), as Flink's: the minimum over its Kafka partitions of
    the latest event time committed, leaving out a partition without new records for
    idle_seconds, so that one idle partition does not hold back every marker. When every
    partition is idle, the maximum (as Flink's watermark valve does once all inputs are idle):
    nothing more is coming that the job knows of. None before any event time is committed.

    A latest event time more than max_future_seconds ahead of `now` is left out too: the tasks
    never let such a time count (etl.rows.placement), so only a release without the bound
    stored it, and trusting it would pin the watermark in the future for good."""
    beyond = beyond_bound(committed, now, max_future_seconds)
    known, active = [], []
    for key, offset in committed.items():
        if offset.max_event_ms is None or key in beyond:
            continue
        known.append(offset.max_event_ms)
        since = None if offset.active_at is None else now - dt.datetime.fromisoformat(offset.active_at)
        if since is not None and since.total_seconds() <= idle_seconds:
            active.append(offset.max_event_ms)
    if active:
        return min(active)
    return max(known) if known else None


def beyond_bound(committed: Mapping, now: dt.datetime, max_future_seconds: float | None) -> dict:
    """The committed offsets whose latest event time is more than max_future_seconds ahead of now."""
    if max_future_seconds is None:
        return {}
    bound = future_bound_ms(now, max_future_seconds)
    return {key: offset for key, offset in committed.items()
            if offset.max_event_ms is not None and offset.max_event_ms > bound}


def _utc_text(ms: int) -> str:
    return (dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=ms)).isoformat(timespec="seconds") + "Z"


def marker_status(settings: SuccessMarkerConfig, newest: Batch | None) -> dict:
    """The markers part of `etl status`: what awaits a marker, and late data seen so far."""
    ledger = Ledger.of(newest)
    return {"enabled": settings.enabled, "delay_seconds": settings.delay_seconds,
            "awaiting": [a.describe() for a in ledger.unmarked], "late_count": ledger.late_count,
            "late": list(ledger.late)}
