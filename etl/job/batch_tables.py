"""Which table each range of a batch is written to, and that table's parts: its view of the
config (Config.for_table), its folders (Warehouse.for_table) and its writer spec.

A one-table job's batch has one table, the job's, for every range, as before. A routed job's
batch records when it is planned which tables each topic's records go to (Batch.tables, from
etl.model.routes), so that every attempt, and a resumed batch, writes each range where it was
planned: the routing of a topic may change between plans (a newcomer's table, an edited route),
never within one.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from etl.config import Config
from etl import faults
from etl.config.routes import RouteConfig
from etl.hive.registrar import HiveRegistrar
from etl.job.partition_writer import WriterSpec
from etl.job.range_task import RangeResult, SplitTable, SplitTarget
from etl.model.batch import TABLE_ROWS_KEY, Batch, OffsetRange
from etl.model.binding import BindingMismatch
from etl.model.route_binding import routes_hint
from etl.model.naming import partition_path
from etl.model.routes import TopicSplit
from etl.model.shape import JobShape, RangeRouting
from etl.model.table_ddl import TableDdl
from etl.rows.decoders import Decoder
from etl.sink.manifest import Part, manifest_dir
from etl.sink.warehouse import Warehouse
from etl.source.topics import JobTopics

SpecFor = Callable[[RouteConfig, str], WriterSpec]  # a route's writer spec for a topic, built once per command
# A split's field's decoder (route, field, topic), built once per command.
ProbeFor = Callable[[RouteConfig, str, str], Decoder]
TableRegistrar = Callable[[Config, Warehouse, TableDdl | None], HiveRegistrar]  # a table's, ensured once per command


@dataclass(frozen=True)
class BatchTable:
    name: str
    config: Config  # the table's view
    warehouse: Warehouse  # the table's folders, beside the job's rejected table
    spec: WriterSpec

    def rollup_dirs(self, values: dict[str, str]) -> tuple[str, ...]:
        """The partials folder of the partition `values` of each rollup of the table (spec.rollups)."""
        return tuple(self.warehouse.partials_dir(rollup.partials_table, values) for rollup in self.spec.rollups)


class BatchTables:
    """The tables of one batch's ranges. `shape`: the job's, with its config (etl.model.shape); `spec_for`: a
    route's writer spec; `probe_for`: the decoder of a split topic's field (etl.rows.routing), both built once
    per command."""

    def __init__(self, batch: Batch, warehouse: Warehouse, shape: JobShape, spec_for: SpecFor,
                 probe_for: ProbeFor | None = None):
        self._batch, self._config, self._warehouse, self._spec_for = batch, shape.config, warehouse, spec_for
        self._probe_for, self._shape = probe_for, shape
        self._tables: dict[str, BatchTable] = {}
        self._routed: dict[str, RangeRouting] = {}

    def of(self, r: OffsetRange) -> BatchTable:
        """The table the range's records are written to (a split's first)."""
        return self.tables_of(r)[0]

    def tables_of(self, r: OffsetRange) -> list[BatchTable]:
        """The tables the range's records are written to: one, or a split's."""
        chosen, routed = self._routing(r)
        return [self._table(route, name, r.topic) for route, name in zip(chosen, routed.tables)]

    def split_of(self, r: OffsetRange) -> TopicSplit | None:
        return self._routing(r)[1].split

    def manifest_root(self, r: OffsetRange) -> str:
        """Where the range's manifest is, if it has one: a split's in the job's rejected table."""
        return self._warehouse.rejected_root if self.split_of(r) else self.of(r).warehouse.table_root

    def part_dir(self, r: OffsetRange, part: Part) -> str:
        """The folder of one of the range's parts by event time: in its table (a split's names it),
        or in the range's own."""
        table = next(t for t in self.tables_of(r) if t.name == part.table) if part.table else self.of(r)
        return table.warehouse.main_dir(part.partition)

    def split_target(self, r: OffsetRange, values: dict[str, str]) -> SplitTarget | None:
        """What a split range's task needs (etl.job.route_task); None for a range of one table."""
        split = self.split_of(r)
        if split is None:
            return None
        chosen, _routed = self._routing(r)
        assert self._probe_for is not None
        tables = tuple(SplitTable(table.name, route.name, table.warehouse.main_dir(values), table.spec,
                                  table.warehouse.table_root, dict(table.warehouse.relocations.main))
                       for route, table in zip(chosen, self.tables_of(r)))
        return SplitTarget(split, self._probe_for(chosen[0], split.field, r.topic), tables, partition_path(values),
                           self._warehouse.rejected_root)

    def all(self) -> list[BatchTable]:
        """The batch's tables, each once, in the order of its ranges."""
        every = (table for r in self._batch.file_ranges for table in self.tables_of(r))
        return list({table.name: table for table in every}.values())

    def folders(self, values: dict[str, str]) -> list[str]:
        """Where the batch's tasks write: each table's partition folder, the rejected one, the
        rollups' partials folders, and the folders of the split ranges' manifests."""
        manifests = {manifest_dir(self._warehouse.rejected_root, r.topic, r.partition)
                     for r in self._batch.file_ranges if self.split_of(r)}
        return [t.warehouse.main_dir(values) for t in self.all()] + [self._warehouse.rejected_dir(values)] + \
            [folder for t in self.all() for folder in t.rollup_dirs(values)] + sorted(manifests)

    def _table(self, route: RouteConfig, name: str, topic: str) -> BatchTable:
        """`topic`: one whose records go to the table (a registry route's spec is its topic's)."""
        if name not in self._tables:
            self._tables[name] = BatchTable(name, self._config.for_table(route, name),
                                            self._shape.table_warehouse(self._warehouse, name),
                                            self._spec_for(route, topic))
        return self._tables[name]

    def _routing(self, r: OffsetRange) -> RangeRouting:
        """The routes of the range's topic and its tables, as the plan recorded them."""
        if r.topic not in self._routed:
            self._routed[r.topic] = self._shape.range_routing(self._batch, r)
        return self._routed[r.topic]


def refuse_lost_topics(chosen: JobTopics, committed_topics: Callable[[], set[str]], config: Config) -> None:
    """A topic whose records went to a table, and that no route gives one now: the config changed
    under it. Not loading it in silence would look like a producer that stopped."""
    if not chosen.unroutable:
        return
    committed = committed_topics()
    stuck = [topic for topic in chosen.unroutable if topic.topic in committed]
    if stuck:
        raise BindingMismatch(f"{stuck[0].describe()}, and it has committed offsets: its records would stop being "
                              f"loaded. Nothing was touched. {routes_hint(config)}",
                              not_loadable=tuple(topic.topic for topic in stuck))


def register_tables(tables: BatchTables, table_registrar: TableRegistrar,
                    partitions: Mapping[str, list[dict[str, str]]]) -> None:
    """A routed batch's partitions in each of its tables (`partitions`, by table: its write mode's
    table_partitions), each table by its own registrar."""
    for table in tables.all():
        table_registrar(table.config, table.warehouse, table.spec.ddl).add_partitions(
            list(partitions.get(table.name, [])), [])
        faults.checkpoint(f"registered:{table.name}")


def routed_written(batch: Batch, results: list[RangeResult], written: dict | None = None) -> dict:
    """What a batch's WRITTEN records: `written` (its write mode's: by event time, an extra with the
    markers' ledger), and for a routed batch the rows each table got in that extra (`etl history`
    shows them)."""
    written = written or {}
    if not batch.tables:
        return written
    rows: dict[str, int] = {}
    for result in results:
        split = [(part.table, part.rows) for part in result.parts if part.table]  # a split range's, per table
        for table, count in split or [(batch.tables[result.range.topic][0], result.rows)]:
            rows[table] = rows.get(table, 0) + count
    return {**written, "extra": {**written.get("extra", batch.extra), TABLE_ROWS_KEY: dict(sorted(rows.items()))}}
