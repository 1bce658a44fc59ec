"""The driver: resume the open batch, or plan a new one, and walk it to COMMITTED.

    lock -> [resume open batch] -> plan -> PLANNED -> tasks write files -> check files
         -> WRITTEN -> add Hive partition -> REGISTERED -> [rollups' PostgreSQL transaction]
         -> commit offsets -> COMMITTED

Each step only moves forward from the state stored in ZooKeeper, so a run that died after
any step is completed by the next one with exactly the recorded ranges (`_complete` falls
through the states the way a recovery switch does).

Before a batch is planned or resumed, the Hive tables are ensured (created, or evolved to the
DDL). A new batch loads its dimensions once and pins their snapshots in the plan; a resumed
batch with files still to write loads them again and compares with the pins
([job] on_dimension_change decides what a change means). The tables go to the tasks as
broadcasts.

With [hive] success_markers on, each plan carries the list of partitions awaiting `_SUCCESS`,
and after a commit, or a run with nothing new, the partitions whose window has closed get it
(etl.sink.markers).
"""
from __future__ import annotations

import functools
import logging
import time
from dataclasses import replace

from etl import faults, logs
from etl.errors import MissingBatchFiles, StateConflict
from etl.hive.registrar import HiveRegistrar
from etl.job import pins
from etl.job.host import BatchHost
from etl.job.observer import NO_OBSERVER, JobObserver, Phase, timed
from etl.job import packing, progress
from etl.job.partition_cap import partition_keys
from etl.job.positions import planning_positions, tagged
from etl.job.rejected_ratio import check_rejected_ratio
from etl.job.summary import BatchSummary, summed
from etl.job.rollup_task import missing_partials
from etl.job.batch_tables import BatchTables, refuse_lost_topics, register_tables, routed_written
from etl.job.range_task import RangeResult, RangeTask, packed_read
from etl.model.shape import planned_tables
from etl.job.tasks import task_failure
from etl.job.write_mode import WarehouseFiles, configured_mode, mode_of
from etl.model.route_binding import JobBinding, check_job_binding, check_planned
from etl.model.batch import Batch, BatchKind, BatchState, OffsetRange
from etl.model.naming import is_temp_name
from etl.model.partitioning import Placement
from etl.model.planner import plan_ranges
from etl.rows.dimensions import DimensionLoader, LoadedDimension, to_ipc
from etl.sink.markers import SuccessMarkers

log = logging.getLogger(__name__)


class Job:
    """The batch state machine. It is handed its parts (etl.job.host.BatchHost: the command's
    context builds them) and builds none itself."""

    def __init__(self, host: BatchHost, observer: JobObserver = NO_OBSERVER):
        self.config, self.store, self.kafka, self.writer = host.config, host.store, host.kafka, host.spec
        self.observer = observer
        self.fs, self.warehouse, self.clock, self.spark = host.fs, host.warehouse, host.clock, host.spark
        self.shape = host.shape
        self.target: JobBinding = self.shape.binding(self.warehouse)
        self._tables = host.registrar
        self.rollup_mirror = host.rollup_mirror
        self._table_registrar, self._spec_for, self._probe_for = host.table_registrar, host.spec_for, host.probe_for
        self._registrar: HiveRegistrar | None = None
        self.committed: Batch | None = None  # the last batch this Job committed
        self.dimensions = DimensionLoader(self.config.dimensions, host.dimension_schema, self.spark.session,
                                          files=self.fs)
        # The clock that partitions a batch is the one that closes its window.
        self.partitioning = self.config.hive.partitioning
        self.partitioner = host.partitioner
        self.mode = configured_mode(self.partitioning)  # a new plan's (etl.job.write_mode)
        self.markers = SuccessMarkers(self.config, self.store, self.fs, self.warehouse, self.partitioner,
                                      clock=self.clock, tables_of=self.shape.marker_tables)

    def _ensure_tables(self) -> HiveRegistrar:
        """Reach the metastore, create or evolve the tables: once, when a batch first needs them
        (etl.context.job). The registrar writes where this Job reads."""
        if self._registrar is None:
            registrar = self._tables()  # timed as the TABLES phase by the context, which built it
            registrar.warehouse = self.warehouse
            self._registrar = registrar
        return self._registrar

    def _locate_partitions(self) -> None:
        """Where compacted partitions' files are now (ZooKeeper, moved with the metastore): each
        batch writes a partition's files where Hive reads it (etl.model.compaction)."""
        self.warehouse = self.warehouse.with_relocations(self.store.compactions.relocations())
        self.markers.warehouse = self.warehouse
        if self._registrar is not None:
            self._registrar.warehouse = self.warehouse

    def run_once(self) -> BatchSummary | None:
        """Complete the open batch if there is one, else plan and complete a new one."""
        self.store.session.assert_lock_held()
        self._locate_partitions()
        logs.bind(batch_id=None, state=None)  # until a batch is planned or resumed, lines are of none
        with timed(self.observer, Phase.PLAN):
            opened = self.store.batches.open_batch()
        if opened:
            check_planned(opened[0], self.target, self.config)
        self._check_binding()
        if opened:
            batch, version = opened
            logs.bind(batch_id=batch.batch_id, state=batch.state.value)
            log.warning("resuming batch %d, left in state %s by %s", batch.batch_id, batch.state.value,
                        batch.planned_by)
            if mode_of(batch) is not self.mode:
                log.warning("batch %d is finished as it was planned ([hive] partition_by changed since); the new "
                            "setting applies from the next batch", batch.batch_id)
            self._ensure_tables()  # a refused schema change stops the run here, before anything is done
            self._ensure_batch_tables(batch)
            return self._complete(batch, version, resumed=True)
        with timed(self.observer, Phase.PLAN):
            batch = self._plan()
        if batch is None:
            with timed(self.observer, Phase.MARKERS):
                # no new data, yet a window may have closed since the last batch
                self.markers.write_due(self.mode.marker_cutoff(self.markers))
            return None
        return self._start(batch)

    def repair(self, ranges: list[OffsetRange], planned: dict[str, str] | None = None) -> BatchSummary:
        """Rewrite committed ranges whose files were lost, as a REPAIR batch: planned, written and
        registered like any batch (so a crash is resumed the same way), committed without moving
        an offset. Each range's `expected` is its partition's committed offset; a routed job's
        range goes to the tables its topic's routes give it now (`etl recover` checked it has
        some), into partition `planned`, where it came from (None: now's)."""
        self.store.session.assert_lock_held()
        self._locate_partitions()
        self._check_binding()
        batch = self._new_batch(tuple(ranges), planned, kind=BatchKind.REPAIR)
        batch = self.shape.planned(batch, lambda: self.kafka.job_topics().tables)
        self._refuse_foreign_files(batch)
        return self._start(batch)

    def _check_binding(self) -> None:
        """The job writes where it always wrote (etl.model.binding); its first run records where."""
        bound = self.store.operator.binding()
        if bound is None:
            self._ensure_tables()  # a table another job owns is refused before this job binds or plans
            self.store.operator.bind_first(self.target)
            log.info("job %s bound to %s", self.config.job.name, self.target.describe())
        else:
            check_job_binding(bound, self.target, self.config, self._committed_topics)

    def _committed_topics(self) -> set[str]:
        return {topic for topic, _ in self.store.offsets.committed_offsets()}

    def _tables_of(self, batch: Batch) -> BatchTables:
        """Each range's table, its folders where this batch writes them (etl.job.batch_tables)."""
        return BatchTables(batch, self.warehouse, self.shape, self._spec_for, self._probe_for)

    def _ensure_batch_tables(self, batch: Batch) -> None:
        """A routed job's tables that the batch writes: created, or claimed and evolved, once a run."""
        for table in self.shape.tables_to_ensure(self._tables_of(batch).all()):
            self._table_registrar(table.config, table.warehouse, table.spec.ddl)

    def _start(self, batch: Batch) -> BatchSummary:
        """Store a new plan (with its dimension pins, marker ledger and the table it writes to)
        and walk it to COMMITTED."""
        batch = replace(mode_of(batch).on_plan(self.markers, batch), target=self.target.to_json())
        self._ensure_tables()  # before the plan is stored: a refused schema change leaves nothing behind
        self._ensure_batch_tables(batch)
        with timed(self.observer, Phase.DIMENSIONS):
            loaded = self.dimensions.load_all() if batch.file_ranges else {}
        batch = replace(batch, dimensions={name: d.snapshot.to_json() for name, d in loaded.items()})
        batch = self._check_partition_cap(batch, loaded)  # before the plan is stored: a refusal leaves nothing
        with timed(self.observer, Phase.PLAN):
            version = self.store.batches.write_plan(batch)
        logs.bind(batch_id=batch.batch_id, state=batch.state.value)
        log.info("batch %d %s PLANNED: %d ranges, %d offsets, Hive partition %s", batch.batch_id,
                 batch.kind.value, len(batch.file_ranges), batch.record_count, batch.partition_values)
        faults.checkpoint("state:PLANNED")
        return self._complete(batch, version, resumed=False, loaded=loaded)

    # -- planning -------------------------------------------------------------------------
    def _plan(self) -> Batch | None:
        chosen = self.kafka.job_topics()  # resolved at every plan: a regex picks up new topics
        refuse_lost_topics(chosen, self._committed_topics, self.config)
        topics = chosen.loaded
        # The positions as `etl run --dry-run` shows them; the plan's ranges tagged with a recreated
        # topic's incarnation.
        positions, topic_ids = planning_positions(self.store.offsets, self.kafka, topics)
        plan = tagged(plan_ranges(positions, self.config.job), self.store.offsets, topic_ids)
        for level, note in plan.notes():
            log.log(level, "%s", note)
        if plan.is_empty:
            log.info("nothing to do: no new records in %s", ", ".join(topics) or "no topic")
            return None
        batch = self._new_batch(plan.ranges, skipped=plan.skipped, topic_ids={t: i for t, i in topic_ids.items() if i})
        batch = planned_tables(batch, chosen.tables)
        self._refuse_foreign_files(batch)
        return batch

    def _new_batch(self, ranges: tuple[OffsetRange, ...], planned: dict[str, str] | None = None, **more) -> Batch:
        """A PLANNED batch with its Placement (etl.model.partitioning), into `planned` when given."""
        planned_at = self.clock()
        found = Placement.of(self.partitioning, self.partitioner, planned_at, self.mode.late_before_ms(self.markers))
        placement = replace(found, planned=dict(planned)) if planned else found
        return Batch(batch_id=self._next_batch_id(), state=BatchState.PLANNED,
                     planned_at=planned_at.isoformat(timespec="seconds"), partition_values=placement.planned,
                     ranges=ranges, planned_by=self.store.session.me.describe(),
                     updated_at=planned_at.isoformat(timespec="seconds"),
                     event_time=self.mode.plan_record(placement), **more)

    def _next_batch_id(self) -> int:
        return (self.store.batches.batch_ids() or [0])[-1] + 1

    def _refuse_foreign_files(self, batch: Batch) -> None:
        """A final file for a range that was never planned would be mistaken for a replay and
        hide the new records (a recreated topic, a manual reset), so refuse before writing."""
        clashes = mode_of(batch).clashes(batch, WarehouseFiles(self.fs, self._tables_of(batch)))
        if clashes:
            target = self._tables_of(batch).all()[0].warehouse.main_dir(batch.partition_values)
            raise StateConflict(f"{target} already holds {clashes[0]} (and {len(clashes) - 1} more), which the "
                                f"new plan would write; it is not part of any open batch. Move it out of the "
                                f"warehouse after checking where it came from, then run again")

    # -- the state machine ----------------------------------------------------------------
    def _complete(self, batch: Batch, version: int, resumed: bool,
                  loaded: dict[str, LoadedDimension] | None = None) -> BatchSummary:
        started = time.monotonic()
        if batch.state is BatchState.PLANNED:
            batch, version = self._write_files(batch, version, loaded)
            logs.bind(state=batch.state.value)  # each line names the state the batch is in
            faults.checkpoint("state:WRITTEN")
        if batch.state is BatchState.WRITTEN:
            registrar = self._ensure_tables()
            with timed(self.observer, Phase.REGISTER):
                self._register(registrar, batch)  # every partition it touched, before the commit
                batch, version = self.store.batches.advance(batch, version, BatchState.REGISTERED)
            logs.bind(state=batch.state.value)
            faults.checkpoint("state:REGISTERED")
        if batch.state is BatchState.REGISTERED:
            with timed(self.observer, Phase.COMMIT):
                self.rollup_mirror.apply(batch, self._tables_of(batch))  # PostgreSQL's, then ZooKeeper's
                batch = self.store.batches.commit(batch, version, self.observer.written_bytes(batch, self.warehouse))
            logs.bind(state=batch.state.value)
            faults.checkpoint("state:COMMITTED")
        with timed(self.observer, Phase.MARKERS):
            # only now: a marker never waits on, nor holds back, a batch's data
            self.markers.write_due(self.mode.marker_cutoff(self.markers))
        with timed(self.observer, Phase.CLEANUP):
            self.store.batches.prune_batches()
        return self._summary(batch, resumed, time.monotonic() - started)

    def _register(self, registrar: HiveRegistrar, batch: Batch) -> None:
        tables = self._tables_of(batch)
        self.shape.register(mode_of(batch), registrar, batch,
                            lambda partitions: register_tables(tables, self._table_registrar, partitions))
        for table in tables.all():  # then each rollup's partials (a planning-time batch's one partition)
            for rollup in table.spec.rollups:
                registrar.add_rollup_partitions(rollup, [batch.partition_values])

    def _write_files(self, batch: Batch, version: int,
                     loaded: dict[str, LoadedDimension] | None) -> tuple[Batch, int]:
        if loaded is None and self.config.dimensions and self._missing_files(batch):
            with timed(self.observer, Phase.DIMENSIONS):
                batch, version, loaded = pins.resumed(batch, version, self.config, self.dimensions, self.store,
                                                        self.clock)
        if batch.file_ranges:  # the tables, then Spark for the tasks: each started (and timed) before them
            self._ensure_tables()
            self.spark.context()
        with timed(self.observer, Phase.TASKS):
            results = self._run_tasks(batch, loaded or {})
        with timed(self.observer, Phase.CHECK):
            return self._written(batch, version, results)

    def _written(self, batch: Batch, version: int, results: list[RangeResult]) -> tuple[Batch, int]:
        self._check_files(batch)
        self._sweep_temp_files(batch, results)
        rows, rejected = sum(r.rows for r in results), sum(r.rejected for r in results)
        check_rejected_ratio(self.config, batch, rows, rejected)
        unmatched = {d.name: sum(r.unmatched.get(d.name, 0) for r in results)
                     for d in self.config.dimensions if d.joined}
        ignored = summed(r.ignored_fields for r in results)
        last_records = {f"{r.range.topic}:{r.range.partition}": r.last_record
                        for r in results if r.last_record is not None}
        more = routed_written(batch, results, mode_of(batch).written(batch, results, self.markers, self.config.hive))
        return self.store.batches.advance(batch, version, BatchState.WRITTEN, rows=rows, rejected=rejected,
                                  unmatched=unmatched or None, ignored_fields=ignored, last_records=last_records,
                                  **more)

    def _run_tasks(self, batch: Batch, loaded: dict[str, LoadedDimension]) -> list[RangeResult]:
        if not batch.file_ranges:
            return []
        values = batch.partition_values
        for table in self._tables_of(batch).all():
            for folder in (table.warehouse.main_dir(values), *table.rollup_dirs(values)):
                self.fs.makedirs(folder)
        return self._on_executors(batch, loaded, mode_of(batch).run_task, shown=True)

    def _check_partition_cap(self, batch: Batch, loaded: dict[str, LoadedDimension]) -> Batch:
        """[hive] max_partitions_per_batch: the ranges are read and placed once, nothing written."""
        if not batch.file_ranges or batch.kind is BatchKind.REPAIR:  # a repair rewrites committed ranges as they were
            return batch
        return mode_of(batch).capped(batch, self.config.hive, lambda: self._partition_keys(batch, loaded))

    def _partition_keys(self, batch: Batch, loaded: dict[str, LoadedDimension]) -> list[list[int]]:
        with timed(self.observer, Phase.PLAN):
            return self._on_executors(batch, loaded, partition_keys)

    def _on_executors(self, batch: Batch, loaded: dict[str, LoadedDimension], function, shown: bool = False) -> list:
        """`function(task, lookups=...)` for each range, each in one Spark task (etl.job.packing)."""
        tables = self._tables_of(batch)
        tasks = [self._range_task(batch, r, tables) for r in batch.file_ranges]
        context = self.spark.context()
        # Each dimension is shipped once per executor, not once per task.
        broadcasts = {name: context.broadcast(to_ipc(d.table)) for name, d in loaded.items()}
        packs = packing.packed(tasks, [r.size for r in batch.file_ranges], self.config.job.records_per_task,
                               context.defaultParallelism)
        rdd = context.parallelize(packs, len(packs))  # one RDD partition, one Spark task, per pack
        call = functools.partial(function, lookups=broadcasts)
        try:
            if not shown:
                return rdd.flatMap(functools.partial(packing.run_each, call, reads=packed_read)).collect()
            with progress.reporting(context, batch.batch_id, len(tasks), self.config.job.progress_seconds) as seen:
                return rdd.flatMap(functools.partial(packing.run_each, seen.counted(call), reads=packed_read)).collect()
        except Exception as exc:
            raise task_failure(batch, exc) from exc
        finally:
            for handle in broadcasts.values():
                handle.destroy()

    def _range_task(self, batch: Batch, r: OffsetRange, tables: BatchTables) -> RangeTask:
        warehouse, spec = tables.of(r).warehouse, tables.of(r).spec
        return RangeTask(r, warehouse.main_dir(batch.partition_values), warehouse.rejected_dir(batch.partition_values),
                         self.config.warehouse, self.config.kafka, f"etl-{self.config.job.name}-reader", spec,
                         mode_of(batch).task_placing(batch, warehouse.table_root, self.partitioning.max_open_files,
                                                     dict(warehouse.relocations.main)),
                         tables.split_target(r, batch.partition_values),
                         tables.of(r).rollup_dirs(batch.partition_values))

    def _missing_files(self, batch: Batch) -> list[str]:
        missing = mode_of(batch).missing(batch, WarehouseFiles(self.fs, self._tables_of(batch)))
        return [r.file_range.stem for r in missing]

    def _check_files(self, batch: Batch) -> None:
        missing = self._missing_files(batch)
        if missing:
            where = self.shape.missing_files_where(mode_of(batch), batch, self.warehouse)
            raise MissingBatchFiles(f"batch {batch.batch_id}: {len(missing)} planned files {where}, e.g. {missing[0]}; "
                                    f"the batch stays PLANNED and the next run writes them")
        partials = missing_partials(self.fs, self._tables_of(batch), batch)  # each range's task writes them last
        if partials:
            raise MissingBatchFiles(f"batch {batch.batch_id}: {len(partials)} rollup partials are missing, e.g. "
                                    f"{partials[0]}; the batch stays PLANNED and the next run writes them")

    def _sweep_temp_files(self, batch: Batch, results: list[RangeResult]) -> None:
        """Every planned file is published, so temp files left in the batch's directories
        belong to dead attempts (a killed run, a failed or losing speculative task)."""
        for folder in self._batch_folders(batch, results):
            stale = [name for name in self.fs.list_dir(folder) if is_temp_name(name)]
            for name in stale:
                self.fs.delete(f"{folder}/{name}")
            if stale:
                log.warning("removed %d temp files of dead attempts from %s", len(stale), folder)

    def _batch_folders(self, batch: Batch, results: list[RangeResult]) -> list[str]:
        tables = self._tables_of(batch)
        return tables.folders(batch.partition_values) + mode_of(batch).sweep_folders(tables, batch, results)

    def _summary(self, batch: Batch, resumed: bool, seconds: float) -> BatchSummary:
        self.committed = batch  # for the observer's batch_committed (etl.ops.run)
        return BatchSummary.of(batch, resumed, seconds, self.config.job.max_records_per_partition)
