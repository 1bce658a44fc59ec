"""Compaction of a Hive partition's small files, exactly once, while analysts query.

Each compaction is a write-ahead plan in ZooKeeper (etl.model.compaction) walked forward:
  PLANNED   the merged files are written into a new folder, under temp names, each published
            by a no-replace rename: a replay finds the ones already there and writes the rest.
  WRITTEN   every merged file is in place: `ALTER TABLE ... PARTITION ... SET LOCATION` points
            the Hive partition at the new folder, in one metastore call, so a query through the
            metastore reads all the old files or all the new ones, never both or neither.
  SWITCHED  set with the partition's new folder in ZooKeeper in one fenced transaction, so the
            next batch writes its late rows where Hive reads. The replaced files stay readable
            for `keep_superseded_minutes`, for queries that listed them before the switch; a
            later run deletes them, and then the plan.
A run killed anywhere is carried on by the next `etl compact`, `etl run` or `etl recover`. A
PLANNED compaction whose inputs are no longer all there (deleted by hand) is rolled back: its
new folder is deleted and the partition stays as it was, for `etl verify` to report.
All of it runs under the job lock, with no batch open.
"""
from __future__ import annotations

import datetime as dt
import logging
import posixpath
from typing import Callable

from etl import faults
from etl.compaction.merge import MergeAltered, merge_files
from etl.compaction.partials import PartialsFolder
from etl.compaction.records import CompactionStore
from etl.compaction.switch import PartitionSwitch, plan_folder
from etl.compaction.tables import TableViews
from etl.config import Config
from etl.errors import WarehouseError
from etl.model.compaction import (CompactionPlan, CompactionState, TableKind, compaction_of_folder,
                                  partition_of_folder)
from etl.model.naming import is_temp_name, temp_name
from etl.sink.commit import publish
from etl.sink.fs import WarehouseFileSystem
from etl.sink.layout import FileLayout
from etl.sink.markers import MARKER_NAME
from etl.sink.warehouse import Warehouse

log = logging.getLogger(__name__)


class Compactor:
    def __init__(self, config: Config, store: CompactionStore, fs: WarehouseFileSystem, views: TableViews,
                 clock: Callable[[], dt.datetime]):
        """Each plan is carried out through its own table's view and metastore client (`views`),
        chosen by the table it names; no client is built before a plan needs it."""
        self.config, self.store, self.fs, self.clock = config, store, fs, clock
        self.views = views
        self.views.relocated(store.compactions.relocations())
        self.switch = PartitionSwitch(views.registrar)
        self.partials = PartialsFolder(fs, lambda: views.warehouse(None), lambda: views.registrar(None),
                                       FileLayout.of(config))

    def finish_pending(self) -> list[CompactionPlan]:
        """Carry every compaction under way as far as it may go now; returns those still waiting
        for their superseded files' grace period."""
        waiting = []
        for plan, version in self.store.compactions.open_compactions():
            left = self.carry_on(plan, version)
            if left is not None:
                waiting.append(left)
        return waiting

    def carry_on(self, plan: CompactionPlan, version: int) -> CompactionPlan | None:
        """Walk one compaction forward; None once it is finished or rolled back."""
        self.store.session.assert_lock_held()
        if plan.state is CompactionState.PLANNED:
            missing = [f.name for f in plan.inputs if not self.fs.exists(self._source(plan, f.name))]
            missing += self.partials.missing(plan)
            if missing:
                self._roll_back(plan, version, missing)
                return None
            try:
                self._write_outputs(plan)
            except MergeAltered:
                self._discard_outputs(plan, version)
                raise
            plan, version = self.store.compactions.advance_compaction(plan, version, CompactionState.WRITTEN)
            faults.checkpoint("compact:WRITTEN")
        if plan.state is CompactionState.WRITTEN:
            self.switch.point_at_target(plan, self._view(plan))
            self.partials.switch(plan)
            faults.checkpoint("compact:metastore-switched")
            plan, version = self.store.compactions.advance_compaction(plan, version, CompactionState.SWITCHED,
                                                          switched_at=self.clock().isoformat(timespec="seconds"))
            self.views.relocated(self.store.compactions.relocations())
            log.info("%s", plan.describe())
            faults.checkpoint("compact:SWITCHED")
        if not self._grace_over(plan):
            return plan
        self._delete_superseded(plan)
        faults.checkpoint("compact:DELETED")
        self.store.compactions.drop_compaction(plan, version)
        return None

    # -- PLANNED -> WRITTEN ---------------------------------------------------------------
    def _write_outputs(self, plan: CompactionPlan) -> None:
        target = self._folder(plan, plan.target)
        self.fs.makedirs(target)
        proven = self._proven_inputs(plan)
        layout = FileLayout.of(self.config)  # the rejected table's: Parquet, none of the table's columns
        layout = layout.without_columns() if plan.table is TableKind.REJECTED else layout
        for index, output in enumerate(plan.outputs):
            final = posixpath.join(target, output.name)
            if self.fs.exists(final):
                continue  # published by an earlier attempt
            temp = posixpath.join(target, temp_name(output.name))
            merge_files(self.fs, [self._source(plan, name) for name in output.inputs], temp, plan.ranges_of(output),
                        self.config.job.row_group_size, layout, proven)
            publish(self.fs, temp, final)
            faults.checkpoint(f"compact:merged:{index}")
        if plan.marker:
            self._copy_marker(plan, target)
        self.partials.write(plan)
        for name in self.fs.list_dir(target):  # temp files of attempts that died
            if is_temp_name(name):
                self.fs.delete(posixpath.join(target, name))
        present = set(self.fs.list_dir(target))
        absent = [o.name for o in plan.outputs if o.name not in present]
        if absent:
            raise WarehouseError(f"compaction {plan.compaction_id}: {absent[0]} is not in {target} after it was "
                                 f"published; the next run writes it again")

    def _proven_inputs(self, plan: CompactionPlan) -> set[str]:
        """The inputs an earlier compaction merged with checksums, as its record in ZooKeeper says
        (never as their own footers say: a file rewritten without the key would pass unchecked)."""
        replaced = compaction_of_folder(plan.source)
        names = set() if replaced is None else \
            self.store.compactions.checksummed_outputs([replaced]).get(replaced, frozenset())
        return {self._source(plan, name) for name in names}

    def _copy_marker(self, plan: CompactionPlan, target: str) -> None:
        final = posixpath.join(target, MARKER_NAME)
        if self.fs.exists(final) or not self.fs.exists(self._source(plan, MARKER_NAME)):
            return
        with self.fs.open_read(self._source(plan, MARKER_NAME)) as handle:
            body = handle.read()
        temp = posixpath.join(target, temp_name(MARKER_NAME))
        with self.fs.open_write(temp) as handle:
            handle.write(body)
        publish(self.fs, temp, final)

    # -- SWITCHED -> gone -----------------------------------------------------------------
    def _grace_over(self, plan: CompactionPlan) -> bool:
        switched = dt.datetime.fromisoformat(plan.switched_at)
        keep = dt.timedelta(seconds=self.config.compaction.keep_superseded_seconds)
        return self.clock() >= switched + keep

    def _delete_superseded(self, plan: CompactionPlan) -> None:
        names = [f.name for f in plan.inputs]
        if partition_of_folder(plan.source) is not None:
            names.append(MARKER_NAME)  # an earlier compaction's folder: nothing is left to vouch for
        self.switch.refuse_if_hive_reads(plan, self._view(plan), plan.source, "delete the files it replaced")
        for name in names:
            self.fs.delete(self._source(plan, name))  # False when an earlier attempt deleted it
        self.partials.delete_replaced(plan)
        log.info("compaction %d: deleted %d superseded files from %s", plan.compaction_id, len(plan.inputs),
                 plan.source)

    def _roll_back(self, plan: CompactionPlan, version: int, missing: list[str]) -> None:
        target = self._folder(plan, plan.target)
        self.switch.refuse_if_hive_reads(plan, self._view(plan), plan.target, "roll back (delete its new folder)")
        for name in self.fs.list_dir(target):
            self.fs.delete(posixpath.join(target, name))
        self.partials.discard(plan)
        log.error("compaction %d rolled back: %d of its input files are gone from %s (e.g. %s); the partition is "
                  "left as it is: run `etl verify`", plan.compaction_id, len(missing), plan.source, missing[0])
        self.store.compactions.drop_compaction(plan, version)

    def _discard_outputs(self, plan: CompactionPlan, version: int) -> None:
        """A merge refused to publish (its values are not its inputs'): the plan is dropped and the
        partition left as it was, so that no later run starts by failing on it."""
        target = self._folder(plan, plan.target)
        self.switch.refuse_if_hive_reads(plan, self._view(plan), plan.target, "roll back (delete its new folder)")
        for name in self.fs.list_dir(target):
            self.fs.delete(posixpath.join(target, name))
        self.partials.discard(plan)
        log.error("compaction %d of %s rolled back: a merge's values differed from its inputs'; the partition is "
                  "left as it is", plan.compaction_id, plan.partition)
        self.store.compactions.drop_compaction(plan, version)

    # -- paths ----------------------------------------------------------------------------
    def _view(self, plan: CompactionPlan) -> Warehouse:
        return self.views.warehouse(plan.table_name)

    def _folder(self, plan: CompactionPlan, relative: str) -> str:
        return plan_folder(self._view(plan), plan, relative)

    def _source(self, plan: CompactionPlan, name: str) -> str:
        return posixpath.join(self._folder(plan, plan.source), name)
