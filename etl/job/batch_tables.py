"""Which table each range of a batch is written to, and that table's parts: its view of the
config (Config.for_table), its folders (Warehouse.for_table) and its writer spec.

A one-table job's batch has one table, the job's, for every range, as before. A routed job's
batch records when it is planned which tables each topic's records go to (Batch.tables, from
etl.model.routes), so that every attempt, and a resumed batch, writes each range where it was
planned: the routing of a topic may change between plans (a newcomer's table, an edited route),
never within one.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from etl.config import Config
from etl.config.routes import RouteConfig
from etl.errors import StateConflict
from etl.hive.registrar import HiveRegistrar
from etl.job.partition_writer import WriterSpec
from etl.job.range_task import RangeResult
from etl.model.batch import TABLE_ROWS_KEY, Batch, OffsetRange
from etl.model.binding import BindingMismatch
from etl.model.route_binding import routes_hint
from etl.model.routes import PlanTables
from etl.sink.warehouse import Warehouse
from etl.source.topics import JobTopics

SpecFor = Callable[[RouteConfig], WriterSpec]  # a route's writer spec, built once per command
TableRegistrar = Callable[[Config, Warehouse], HiveRegistrar]  # a table's, ensured once per command


@dataclass(frozen=True)
class BatchTable:
    name: str
    config: Config  # the table's view
    warehouse: Warehouse  # the table's folders, beside the job's rejected table
    spec: WriterSpec


class BatchTables:
    def __init__(self, batch: Batch, config: Config, warehouse: Warehouse, spec_for: SpecFor):
        self._batch, self._config, self._warehouse, self._spec_for = batch, config, warehouse, spec_for
        self._tables: dict[str, BatchTable] = {}

    def of(self, r: OffsetRange) -> BatchTable:
        """The table the range's records are written to."""
        if self._config.routes.implicit:
            return self._table(self._config.routes.routes[0], self._config.hive.the_table)
        planned = self._batch.tables.get(r.topic)
        if not planned:
            raise StateConflict(f"batch {self._batch.batch_id} plans range {r.file_name} but records no table for topic "
                                f"{r.topic}: the plan is damaged")
        return self._table(self._route_of(r.topic, planned[0]), planned[0])

    def all(self) -> list[BatchTable]:
        """The batch's tables, each once, in the order of its ranges."""
        return list({table.name: table for table in map(self.of, self._batch.file_ranges)}.values())

    def _table(self, route: RouteConfig, name: str) -> BatchTable:
        if name not in self._tables:
            self._tables[name] = BatchTable(name, self._config.for_table(route, name),
                                            self._warehouse if self._config.routes.implicit
                                            else self._warehouse.for_table(name), self._spec_for(route))
        return self._tables[name]

    def _route_of(self, topic: str, table: str) -> RouteConfig:
        for route in self._config.routes.of_topic(topic):
            if route.table_for(topic) == table:
                return route
        raise StateConflict(f"batch {self._batch.batch_id} writes topic {topic} to table {table}, and no [route] of "
                            f"the config does: the config changed under an open batch; restore it to finish the batch")


def planned_tables(batch: Batch, config: Config, routing: PlanTables | None) -> Batch:
    """A routed job's new batch with each of its topics' tables recorded."""
    if config.routes.implicit or routing is None:
        return batch
    topics = dict.fromkeys(r.topic for r in batch.ranges)
    return replace(batch, tables={topic: list(routing.topics[topic].tables) for topic in topics})


def refuse_lost_topics(chosen: JobTopics, committed_topics: Callable[[], set[str]], config: Config) -> None:
    """A topic whose records went to a table, and that no route gives one now: the config changed
    under it. Not loading it in silence would look like a producer that stopped."""
    if not chosen.unroutable:
        return
    committed = committed_topics()
    for topic in chosen.unroutable:
        if topic.topic in committed:
            raise BindingMismatch(f"{topic.describe()}, and it has committed offsets: its records would stop being "
                                  f"loaded. Nothing was touched. {routes_hint(config)}")


def register_routed(tables: BatchTables, table_registrar: TableRegistrar, registrar: HiveRegistrar,
                    batch: Batch) -> None:
    """A routed job's batch (by planning time): its partition in each of its tables, then in the
    job's rejected table when it rejected rows."""
    for table in tables.all():
        table_registrar(table.config, table.warehouse).add_partition(batch.partition_values, with_rejected=False)
    if batch.rejected:
        registrar.add_partitions([], [batch.partition_values])


def routed_written(batch: Batch, results: list[RangeResult]) -> dict:
    """What a routed batch's WRITTEN adds: the rows each table got (`etl history` shows them)."""
    if not batch.tables:
        return {}
    rows: dict[str, int] = {}
    for result in results:
        table = batch.tables[result.range.topic][0]
        rows[table] = rows.get(table, 0) + result.rows
    return {"extra": {**batch.extra, TABLE_ROWS_KEY: dict(sorted(rows.items()))}}
