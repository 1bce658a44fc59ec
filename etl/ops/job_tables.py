"""The tables a command inspects: a one-table job's table, or each table a routed job has loaded
into (its committed topics' tables, as the config routes them now, or as the routes `etl bind`
retired routed them) and each table its open batch writes, each with its folders
(etl.sink.warehouse.Warehouse.for_table)."""
from __future__ import annotations

from typing import Iterable

from etl.config import Config
from etl.model.batch import Batch
from etl.model.route_binding import JobBinding, RouteBinding
from etl.model.routes import PlanTables, route_topics
from etl.sink.warehouse import Warehouse


def job_tables(config: Config, warehouse: Warehouse, committed_topics: Iterable[str], open_batch: Batch | None,
               bound: JobBinding | None = None) -> list[tuple[str, Warehouse]]:
    if config.routes.implicit:
        return [(config.hive.the_table, warehouse)]
    committed, rejected = sorted(committed_topics), config.hive.rejected_table
    routed = route_topics(config.routes, committed, committed, rejected)
    left = [topic for topic in committed if topic not in routed.topics]
    retired = route_topics(bound.retired_routes(), left, left, rejected) \
        if isinstance(bound, RouteBinding) and left else PlanTables()
    planned = {table for tables in (open_batch.tables.values() if open_batch else ()) for table in tables}
    return [(name, warehouse.for_table(name)) for name in sorted(routed.tables() | retired.tables() | planned)]
