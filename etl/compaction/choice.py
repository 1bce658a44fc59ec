"""Which Hive partitions `etl compact` merges, and the plan of each (etl.model.compaction).

A partition is compacted when its folder (where Hive reads it now) holds at least `min_files`
committed files and, with `only_finished`, its `_SUCCESS` is written or its window closed more
than [hive] success_marker_delay_seconds ago: rows still arriving would only make new small
files beside the merged ones. `--partition` names partitions whatever their state. Partitions
come from the metastore, each checked to be registered where the job keeps it; one registered
elsewhere is skipped with the reason, like one whose files overlap or reach past the committed
offsets (both are `etl verify`'s to explain). Each table is looked at through its own view and
metastore client (etl.compaction.tables), and its plans name it.
"""
from __future__ import annotations

import datetime as dt
import posixpath
from dataclasses import dataclass, replace

from etl.compaction.merge import read_facts
from etl.compaction.partials import plan_folds
from etl.compaction.plan import plan_outputs
from etl.compaction.tables import CompactedTable, TableViews
from etl.config import Config
from etl.model.compaction import CompactionPlan, InputFile, TableKind, compacted_folder
from etl.model.naming import parse_final_name, partition_values
from etl.model.partitioning import Partitioner
from etl.sink.fs import WarehouseFileSystem
from etl.sink.markers import MARKER_NAME
from etl.sink.warehouse import same_location
from etl.errors import StateConflict


@dataclass(frozen=True)
class Choice:
    """One partition looked at: chosen (skipped None) or left alone, and why."""

    table: TableKind
    partition: str
    files: int
    bytes: int
    skipped: str | None = None
    table_name: str | None = None  # a routed job's table (etl.compaction.tables)

    @property
    def label(self) -> str:
        return self.table_name or self.table.value

    def to_json(self) -> dict:
        return {"table": self.table.value, "partition": self.partition, "files": self.files, "bytes": self.bytes,
                "skipped": self.skipped, **({"table_name": self.table_name} if self.table_name else {})}


class CompactionChooser:
    def __init__(self, config: Config, fs: WarehouseFileSystem, views: TableViews, partitioner: Partitioner, clock):
        self.config, self.fs, self.views, self.partitioner, self.clock = config, fs, views, partitioner, clock
        self.settings = config.compaction

    def look(self, tables: tuple[CompactedTable, ...], only: list[str] | None) -> list[Choice]:
        """Every partition of each table (or of `only`), chosen or not, table by table."""
        choices = []
        for table in tables:
            registered = self.views.registrar(table.name).partitions(table.kind)
            for partition in sorted(registered) if only is None else [p for p in only if p in registered]:
                choices.append(self._look_at(table, partition, registered[partition], only is not None))
        return choices

    def _look_at(self, table: CompactedTable, partition: str, registered: str, named: bool) -> Choice:
        warehouse, kind = self.views.warehouse(table.name), table.kind
        folder = warehouse.folder(kind, partition)
        names = self.fs.list_dir(folder)
        files = [n for n in names if parse_final_name(n, warehouse.file_format(kind)) is not None]
        choice = Choice(kind, partition, len(files), 0, table_name=table.name)  # sizes asked for once chosen
        if not same_location(registered, warehouse.hive_uri(folder)):
            return _skip(choice, f"registered at {registered}, not at {warehouse.hive_uri(folder)} where the job "
                                 f"keeps it (`etl verify` explains)")
        if len(files) < self.settings.min_files:
            return _skip(choice, f"{len(files)} files, fewer than min_files = {self.settings.min_files}")
        if self.settings.only_finished and not named and not self._finished(partition, MARKER_NAME in names):
            return _skip(choice, "not finished: no _SUCCESS, and its window closed less than "
                                 "success_marker_delay_seconds ago")
        return replace(choice, bytes=sum(self.fs.info(posixpath.join(folder, n)).size for n in files))

    def _finished(self, partition: str, has_marker: bool) -> bool:
        if has_marker:
            return True
        delay = dt.timedelta(seconds=self.config.hive.success_markers.delay_seconds)
        try:
            end = self.partitioner.window(partition_values(partition)).end
        except (KeyError, ValueError):
            return False  # a partition whose values name no time is never finished by the clock
        return end + delay <= self.clock()

    def plan(self, choice: Choice, compaction_id: int, committed: dict, planned_by: str) -> CompactionPlan | Choice:
        """The plan of a chosen partition, or the choice skipped with the reason."""
        warehouse = self.views.warehouse(choice.table_name)
        folder = warehouse.folder(choice.table, choice.partition)
        inputs = []
        file_format = warehouse.file_format(choice.table)  # the rejected table's are Parquet
        for name in sorted(n for n in self.fs.list_dir(folder) if parse_final_name(n, file_format) is not None):
            path = posixpath.join(folder, name)
            facts, named = read_facts(self.fs, path, file_format), parse_final_name(name, file_format)
            ranges = tuple(facts.ranges or [(named.start, named.end)])
            offset = committed.get((named.topic, named.partition))
            if offset is None or ranges[-1][1] > _committed_end(offset, named.incarnation):
                return _skip(choice, f"{name} reaches past the committed offset; `etl verify` explains")
            inputs.append(InputFile(name, self.fs.info(path).size, facts.rows, ranges))
        try:
            outputs = plan_outputs(inputs, self.settings.target_bytes)
        except StateConflict as exc:
            return _skip(choice, str(exc))
        if len(outputs) >= len(inputs):
            return _skip(choice, f"its {len(inputs)} files are already as large as target_file_mb allows")
        table = choice.table_name or self.config.hive.table
        folds = plan_folds(self.config, self.fs, warehouse, table, choice.partition, outputs) \
            if choice.table is TableKind.MAIN and table is not None else ()
        if isinstance(folds, str):
            return _skip(choice, folds)
        root = warehouse.root(choice.table)
        return CompactionPlan(compaction_id, choice.table, choice.partition, posixpath.relpath(folder, root),
                              compacted_folder(choice.partition, compaction_id), tuple(inputs), outputs,
                              self.clock().isoformat(timespec="seconds"), planned_by,
                              marker=MARKER_NAME in self.fs.list_dir(folder), table_name=choice.table_name,
                              checksums=True, partials=folds)  # merge_files records checksums in every merged file


def _committed_end(offset, incarnation: str) -> int:
    """Where the partition's incarnation (etl.model.identity) committed up to; -1 for one
    ZooKeeper records no offsets of (its files are `etl verify`'s to name, not to merge)."""
    return max((i.end for i in offset.incarnations if i.tag == incarnation), default=-1)


def _skip(choice: Choice, why: str) -> Choice:
    return replace(choice, skipped=why)
