"""A compaction's rollup partials (etl.model.compaction.PartialsFold): folded with the data files
they were computed from, into the partials table's own new folder, switched in the metastore with
the data partition, and the replaced ones deleted with the replaced data files.

Chosen when the plan is made: each rollup of the compacted table folds the partials of the merged
files of its route's topics, one partial per merged file, named as it is. A partition one of whose
files has no partial is not compacted: its partials are `etl verify`'s to name and `etl rollup
rebuild`'s to make, and a fold without one would leave its rows out of the view for good.

A fold is exact: a sum of counts and sums, a min of minimums, a max of maximums, one row per
group. Each folded partial is published as a merged file is: written under a temp name with the
checksums of its values (etl.sink.checksums) taken of the fold in memory and recorded in its
footer, read back and compared, then renamed without replacing, so a replay finds it in place.
The view reads the partials partition's old folder or its new one, never both: its rows are the
same either way, so the two metastore switches (data, partials) need no common transaction.
"""
from __future__ import annotations

import posixpath
from typing import Callable

from etl import faults
from etl.compaction.merge import MergeAltered
from etl.config import Config
from etl.config.rollups import rollup_route
from etl.errors import HiveError
from etl.hive.registrar import HiveRegistrar
from etl.model.compaction import CompactionPlan, OutputFile, PartialsFold, partial_of
from etl.model.naming import is_temp_name, named_range, temp_name
from etl.model.rollup_table import PARTIALS_FORMAT, folded
from etl.sink.checksums import CHECKSUMS_KEY, TableDigest, file_checksums
from etl.sink.commit import publish
from etl.sink.file_format import open_sink, read_columns
from etl.sink.fs import WarehouseFileSystem
from etl.sink.layout import FileLayout
from etl.sink.warehouse import Warehouse, same_location


def plan_folds(config: Config, fs: WarehouseFileSystem, warehouse: Warehouse, table: str, partition: str,
               outputs: tuple[OutputFile, ...]) -> tuple[PartialsFold, ...] | str:
    """The folds of the rollups over `table` (a Hive name), or why the partition is left alone."""
    folds = []
    for rollup in config.rollups:
        route = rollup_route(rollup, config.routes)
        mine = tuple(o.name for o in outputs if _chooses(route, o.name, table))
        if not mine:
            continue
        folder = warehouse.partials_dir(rollup.partials_table, partition)
        present = set(fs.list_dir(folder)) if fs.exists(folder) else set()
        lacking = [name for o in outputs if o.name in mine for name in o.inputs if partial_of(name) not in present]
        if lacking:
            return (f"{rollup.describe()}: {len(lacking)} of its files have no partial in {folder} (e.g. "
                    f"{lacking[0]}), which a fold would leave out: `etl verify` names them, `etl rollup rebuild "
                    f"--rollup {rollup.name} --execute` makes them")
        folds.append(PartialsFold(rollup.name, rollup.partials_table,
                                  posixpath.relpath(folder, warehouse.partials_root(rollup.partials_table)),
                                  tuple(key.name for key in rollup.group_by),
                                  tuple((a.name, a.function.merged_by.value) for a in rollup.aggregates), mine))
    return tuple(folds)


def _chooses(route, name: str, table: str) -> bool:
    found = named_range(name)
    return found is not None and route.chooses(found.topic) and route.table_for(found.topic) == table


class PartialsFolder:
    """The partials side of one compaction's walk (etl.compaction.compactor), through the job's
    warehouse view (with the relocations as last read) and its metastore client."""

    def __init__(self, fs: WarehouseFileSystem, warehouse: Callable[[], Warehouse],
                 registrar: Callable[[], HiveRegistrar], layout: FileLayout):
        self.fs, self._warehouse, self._registrar = fs, warehouse, registrar
        self.layout = layout.without_columns()  # Parquet, whatever the table's format

    def missing(self, plan: CompactionPlan) -> list[str]:
        """The partials the plan folds that are gone (deleted by hand): the plan is rolled back."""
        return [path for fold in plan.partials for name in fold.inputs(plan)
                for path in [self._path(fold, fold.source, name)] if not self.fs.exists(path)]

    def write(self, plan: CompactionPlan) -> None:
        for fold in plan.partials:
            target = self._folder(fold, plan.target)
            self.fs.makedirs(target)
            for name, inputs in fold.partials(plan):
                final = posixpath.join(target, name)
                if not self.fs.exists(final):
                    self._publish(fold, [self._path(fold, fold.source, i) for i in inputs], target, name)
                    faults.checkpoint("compact:partials-folded")
            for name in self.fs.list_dir(target):  # temp files of attempts that died
                if is_temp_name(name):
                    self.fs.delete(posixpath.join(target, name))

    def _publish(self, fold: PartialsFold, sources: list[str], target: str, name: str) -> None:
        columns = list(fold.keys) + [column for column, _ in fold.merges]
        tables = [read_columns(self.fs, path, PARTIALS_FORMAT, columns) for path in sources]
        schema = tables[0].schema
        rows = folded([t.cast(schema) for t in tables], list(fold.keys), list(fold.merges))
        digest = TableDigest(rows.schema)
        digest.add(rows)
        expected = digest.result()
        temp = posixpath.join(target, temp_name(name))
        sink = open_sink(self.fs, temp, rows.schema, max(rows.num_rows, 1), self.layout)
        try:
            sink.open()
            sink.append(rows)
            sink.metadata = {CHECKSUMS_KEY: expected.to_footer()}
            sink.close()
        except BaseException:
            sink.abort()
            raise
        found = file_checksums(self.fs, temp, rows.schema, PARTIALS_FORMAT)
        if expected.differing(found) or found.rows != expected.rows:
            self.fs.delete(temp)
            raise MergeAltered(f"folding {len(sources)} partials of [rollup {fold.rollup}] into {name} wrote other "
                               f"values than the fold's: nothing was published and the partition is left as it was")
        publish(self.fs, temp, posixpath.join(target, name))

    def switch(self, plan: CompactionPlan) -> None:
        """Point each partials partition at its folded folder: once, and idempotent on a replay."""
        for fold in plan.partials:
            warehouse, registrar = self._warehouse(), self._registrar()
            target = warehouse.hive_uri(self._folder(fold, plan.target))
            registered = registrar.location(fold.table, plan.partition)
            if registered is None or not same_location(registered, target):
                registrar.set_location(fold.table, plan.partition, target)
            faults.checkpoint("compact:partials-switched")

    def delete_replaced(self, plan: CompactionPlan) -> None:
        self._delete(plan, lambda fold: fold.source, lambda fold, folder: fold.inputs(plan))

    def discard(self, plan: CompactionPlan) -> None:
        """A compaction rolled back: its folded partials go, the partials partitions stay as they were."""
        self._delete(plan, lambda fold: plan.target, lambda fold, folder: self.fs.list_dir(folder))

    def _delete(self, plan: CompactionPlan, relative: Callable[[PartialsFold], str],
                names: Callable[[PartialsFold, str], list[str]]) -> None:
        """`names` in each fold's folder `relative` to its table's root; never from the folder the
        metastore reads the partials partition from now (asked at this moment): refused as
        etl.compaction.switch refuses the data's."""
        for fold in plan.partials:
            folder = self._folder(fold, relative(fold))
            if not self.fs.exists(folder):
                continue
            registered = self._registrar().location(fold.table, plan.partition)
            if registered is not None and same_location(registered, self._warehouse().hive_uri(folder)):
                raise HiveError(f"compaction {plan.compaction_id} will not delete {fold.table}'s partials from "
                                f"{folder}: Hive reads partition {plan.partition} of {fold.table} from there (it "
                                f"was pointed there by hand?). Nothing was deleted; point it back and run again")
            for name in names(fold, folder):
                self.fs.delete(posixpath.join(folder, name))  # False when an earlier attempt deleted it

    def _folder(self, fold: PartialsFold, relative: str) -> str:
        return posixpath.join(self._warehouse().partials_root(fold.table), relative)

    def _path(self, fold: PartialsFold, relative: str, name: str) -> str:
        return posixpath.join(self._folder(fold, relative), name)
