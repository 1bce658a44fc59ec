"""A job's shape: one table, or [route] sections. What still differs between them is here, and
only here, as etl.job.write_mode keeps what differs between the write modes.

A config without [route] sections is one implicit route (etl.config.routes), and the code that
writes, checks and repairs a batch treats both alike. What a one-table job keeps from before it
could have routes, and a routed job has that it does not:
- the binding: a one-table job is bound to its table and folders (etl.model.binding.Target;
  `etl bind --data-moved` moves its files), a routed job to its routes (RouteBinding);
- the tables: a one-table job's table is in the folder [hive] names (the job's warehouse), its
  plans record no table, and its compaction plans and marker ledgers name none (it is the job's);
  a routed job's tables are folders beside its rejected table, each plan records the tables of
  each of its topics, and a split topic's manifests are in the rejected table;
- the metrics' `table` label (etl.ops.metrics_tables): a one-table job labels every count with
  its table, a routed job each table's rows and files with the table's, and the rest as the job's;
- partitions named before dt was zero-padded, which only a one-table job's table can hold.

`shape_of(config)` chooses; the shape holds no state of its own beyond the config.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import replace
from typing import Any, Callable, Iterable, Mapping, Protocol, Self, Sequence, TypeVar

from etl.config import Config
from etl.config.routes import RouteConfig, Routes, sharing_problem
from etl.errors import StateConflict
from etl.model.batch import TABLE_ROWS_KEY, Batch, OffsetRange
from etl.model.binding import Target
from etl.model.route_binding import JobBinding, RouteBinding
from etl.model.routes import PlanTables, TopicTables, route_topics, topic_tables

ONE_TABLE = ("",)  # the tables of a one-table job's batch, as its marker ledger names them: its own


class Folders(Protocol):
    """A job's folders (etl.sink.warehouse.Warehouse), as far as the shape asks them."""

    def for_table(self, table: str) -> Self: ...

    def main_dir(self, partition: str | dict[str, str]) -> str: ...

    def rejected_dir(self, partition: str | dict[str, str]) -> str: ...


class PartitionAdder(Protocol):
    """A table's Hive registrar (etl.hive.registrar.HiveRegistrar), as far as the shape asks it."""

    def add_partitions(self, main: list[dict[str, str]], rejected: list[dict[str, str]]) -> None: ...


class ModeView(Protocol):
    """A batch's write mode (etl.job.write_mode.WriteMode), as far as the shape asks it."""

    by_event_time: bool

    def register(self, registrar: Any, batch: Batch) -> None: ...

    def table_partitions(self, batch: Batch) -> dict[str, list[dict[str, str]]]: ...

    def main_partitions(self, batch: Batch) -> list[dict[str, str] | str]: ...


W = TypeVar("W", bound=Folders)
T = TypeVar("T")
JOB_WIDE = ""  # the metrics' label of a routed job's count that is of no one table
RangeRouting = tuple[tuple[RouteConfig, ...], TopicTables]  # a topic's routes, and the tables they give it
# A routed batch's tables' own registrars, handed the batch's partitions by table (etl.job.batch_tables).
TableRegistering = Callable[[Mapping[str, list[dict[str, str]]]], None]
JOB_WIDE = ""  # the metrics' label of a routed job's count that is of no one table


JobTable = tuple[str, W]  # one of the job's tables: its name and its folders


class JobShape(ABC):
    def __init__(self, config: Config):
        self.config = config

    @abstractmethod
    def binding(self, warehouse: Folders) -> JobBinding:
        """What the config binds the job to (etl.model.binding); `warehouse`: the job's folders."""

    @abstractmethod
    def table_warehouse(self, warehouse: W, table: str) -> W:
        """The folders of one of the job's tables, from the job's."""

    @abstractmethod
    def plan_name(self, table: str) -> str | None:
        """What compaction plans and records call one of the job's main tables (None: the job's own)."""

    @abstractmethod
    def marker_tables(self, batch: Batch) -> Sequence[str]:
        """The tables whose partitions a batch's _SUCCESS markers await, as the ledger names them."""

    @abstractmethod
    def range_routing(self, batch: Batch, r: OffsetRange) -> RangeRouting:
        """The routes of a range's topic and the tables its batch writes it to, as the plan recorded them."""

    @abstractmethod
    def planned(self, batch: Batch, routing: Callable[[], PlanTables | None]) -> Batch:
        """A new batch with the tables of each of its topics recorded; `routing`: asked when needed."""

    @abstractmethod
    def tables_to_ensure(self, tables: Sequence[T]) -> list[T]:
        """Of a batch's tables, those the run creates, or claims and evolves, beside the job's own registrar's."""

    @abstractmethod
    def register(self, mode: ModeView, registrar: PartitionAdder, batch: Batch, tables: TableRegistering) -> None:
        """Add the Hive partitions a WRITTEN batch touched: `registrar`, the job's own tables';
        `tables`, a routed batch's tables' (etl.job.batch_tables.register_tables)."""

    @abstractmethod
    def held_tables(self, warehouse: W, committed: Callable[[], Iterable[str]], open_batch: Batch | None,
                    bound: Callable[[], JobBinding | None]) -> list[JobTable[W]]:
        """The tables a command inspects (etl.ops.job_tables); `committed`: the topics with committed
        offsets, and `bound`: the job's binding, each read when needed."""

    @abstractmethod
    def topic_routing(self, routing: Callable[[Routes], T]) -> T | None:
        """What gives each chosen topic its tables (`routing`: built from the routes; etl.source.topics
        TopicRouting); None: every topic goes to the job's one table."""

    @abstractmethod
    def legacy_named(self, warehouse: W) -> list[W]:
        """The tables whose folders may hold partitions named before dt was zero-padded."""

    @abstractmethod
    def without_table(self, topics: Iterable[str], routing: Callable[[], PlanTables | None]) -> list[str]:
        """Of `topics`, those no route gives a table now, sorted; `routing`: asked when needed."""

    @abstractmethod
    def preview_folders(self, warehouse: W) -> W | None:
        """The folders a preview names a partition's in; None: each table's."""

    @abstractmethod
    def describe_tables(self) -> str:
        """The job's tables, as a preview's head names them (without the database)."""

    @abstractmethod
    def missing_files_where(self, mode: ModeView, batch: Batch, warehouse: Folders) -> str:
        """Where a batch's missing files were looked for, as the error says it."""

    @abstractmethod
    def data_moved_refusal(self) -> str | None:
        """Why `etl bind --data-moved` does not apply to this job; None: it does."""

    @abstractmethod
    def finish_hint(self) -> str:
        """The command that finishes an open batch with the old config, before `etl bind`."""

    @abstractmethod
    def counts_by_table(self, field: str, total: int, batches: Iterable[Batch]) -> dict[str, int]:
        """A run's count of BatchSummary `field`, by table (JOB_WIDE: of no one table)."""

    @abstractmethod
    def folders_by_table(self, mode: ModeView, warehouse: Folders, batch: Batch) -> dict[str, list[str]]:
        """The folders of a batch's files by table, its rejected table's among them."""

    @abstractmethod
    def always_counted(self) -> tuple[str, ...]:
        """The tables whose files a run counts also when it wrote none (0)."""


class OneTable(JobShape):
    """A config without [route] sections: its table, [hive] table, in the folder [hive] names."""

    def binding(self, warehouse: Folders) -> JobBinding:
        return Target.of(self.config, warehouse)

    def table_warehouse(self, warehouse: W, table: str) -> W:
        return warehouse

    def plan_name(self, table: str) -> str | None:
        return None

    def marker_tables(self, batch: Batch) -> Sequence[str]:
        return ONE_TABLE

    def range_routing(self, batch: Batch, r: OffsetRange) -> RangeRouting:
        implicit = self.config.routes.routes
        return implicit, TopicTables(r.topic, (self.config.hive.the_table,), tuple(route.name for route in implicit))

    def planned(self, batch: Batch, routing: Callable[[], PlanTables | None]) -> Batch:
        return batch

    def tables_to_ensure(self, tables: Sequence[T]) -> list[T]:
        return []  # its one table is the job's registrar's

    def register(self, mode: ModeView, registrar: PartitionAdder, batch: Batch, tables: TableRegistering) -> None:
        mode.register(registrar, batch)

    def held_tables(self, warehouse: W, committed: Callable[[], Iterable[str]], open_batch: Batch | None,
                    bound: Callable[[], JobBinding | None]) -> list[JobTable[W]]:
        return [(self.config.hive.the_table, warehouse)]

    def topic_routing(self, routing: Callable[[Routes], T]) -> T | None:
        return None

    def legacy_named(self, warehouse: W) -> list[W]:
        return [warehouse]

    def without_table(self, topics: Iterable[str], routing: Callable[[], PlanTables | None]) -> list[str]:
        return []

    def preview_folders(self, warehouse: W) -> W | None:
        return warehouse

    def describe_tables(self) -> str:
        return self.config.hive.the_table

    def missing_files_where(self, mode: ModeView, batch: Batch, warehouse: Folders) -> str:
        if mode.by_event_time:
            return "have no manifest"
        return f"are missing in {warehouse.main_dir(batch.partition_values)}"

    def data_moved_refusal(self) -> str | None:
        return None

    def finish_hint(self) -> str:
        return "`etl recover --execute`"

    def counts_by_table(self, field: str, total: int, batches: Iterable[Batch]) -> dict[str, int]:
        return {self.config.hive.the_table: total}

    def folders_by_table(self, mode: ModeView, warehouse: Folders, batch: Batch) -> dict[str, list[str]]:
        main = [warehouse.main_dir(part) for part in mode.main_partitions(batch)]
        return {self.config.hive.the_table: main + [warehouse.rejected_dir(batch.partition_values)]}

    def always_counted(self) -> tuple[str, ...]:
        return (self.config.hive.the_table,)


class Routed(JobShape):
    """A config with [route] sections: its tables are named by its routes, as each plan recorded them."""

    def binding(self, warehouse: Folders) -> JobBinding:
        return RouteBinding.of(self.config, warehouse)

    def table_warehouse(self, warehouse: W, table: str) -> W:
        return warehouse.for_table(table)

    def plan_name(self, table: str) -> str | None:
        return table

    def marker_tables(self, batch: Batch) -> Sequence[str]:
        return batch.routed_tables

    def range_routing(self, batch: Batch, r: OffsetRange) -> RangeRouting:
        planned = batch.tables.get(r.topic)
        if not planned:
            raise StateConflict(f"batch {batch.batch_id} plans range {r.file_range.stem} but records no table for "
                                f"topic {r.topic}: the plan is damaged")
        chosen = self.config.routes.of_topic(r.topic)
        routed = topic_tables(r.topic, chosen) if chosen and not sharing_problem(r.topic, chosen) else None
        if routed is None or list(routed.tables) != list(planned):
            raise StateConflict(f"batch {batch.batch_id} writes topic {r.topic} to {', '.join(planned)}, and the "
                                f"config's routes do not: the config changed under an open batch; restore it to "
                                f"finish the batch")
        return chosen, routed

    def planned(self, batch: Batch, routing: Callable[[], PlanTables | None]) -> Batch:
        return planned_tables(batch, routing())

    def tables_to_ensure(self, tables: Sequence[T]) -> list[T]:
        return list(tables)

    def register(self, mode: ModeView, registrar: PartitionAdder, batch: Batch, tables: TableRegistering) -> None:
        """In each of its tables the partitions the batch wrote there (by table: the write mode's
        table_partitions), then its partition in the job's rejected table when it rejected rows."""
        tables(mode.table_partitions(batch))
        if batch.rejected:
            registrar.add_partitions([], [batch.partition_values])

    def held_tables(self, warehouse: W, committed: Callable[[], Iterable[str]], open_batch: Batch | None,
                    bound: Callable[[], JobBinding | None]) -> list[JobTable[W]]:
        """Each table it loaded into (its committed topics' tables, as the routes give them now and as
        the routes `etl bind` retired gave them), and each table its open batch writes."""
        loaded = sorted(committed())
        routed = route_topics(self.config.routes, loaded, loaded, self.config.hive.rejected_table)
        binding = bound()
        retired = binding.retired_tables(loaded, routed.topics) if isinstance(binding, RouteBinding) else set()
        planned = {table for tables in (open_batch.tables.values() if open_batch else ()) for table in tables}
        return [(name, warehouse.for_table(name)) for name in sorted(routed.tables() | retired | planned)]

    def topic_routing(self, routing: Callable[[Routes], T]) -> T | None:
        return routing(self.config.routes)

    def legacy_named(self, warehouse: W) -> list[W]:
        return []  # its tables were all made after dt was zero-padded

    def without_table(self, topics: Iterable[str], routing: Callable[[], PlanTables | None]) -> list[str]:
        """A topic moved by `etl bind --move-loaded` has its new tables; one no route takes any more has none."""
        chosen = routing()
        return sorted({topic for topic in topics if chosen is None or topic not in chosen.topics})

    def preview_folders(self, warehouse: W) -> W | None:
        return None

    def describe_tables(self) -> str:
        return f"the tables of {len(self.config.routes.routes)} routes"

    def missing_files_where(self, mode: ModeView, batch: Batch, warehouse: Folders) -> str:
        return "are missing in their tables' folders"

    def data_moved_refusal(self) -> str | None:
        return "--data-moved moves a one-table job's files; a job with routes keeps its tables' files in place"

    def finish_hint(self) -> str:
        return "`etl run`"

    def counts_by_table(self, field: str, total: int, batches: Iterable[Batch]) -> dict[str, int]:
        """Rows by the table each batch recorded them in, rejected rows in the job's rejected table,
        the rest (offsets, late rows) the job's."""
        if field == "rejected":
            return {self.config.hive.rejected_table: total}
        if field != "rows":
            return {JOB_WIDE: total}
        rows: dict[str, int] = {}
        for batch in batches:
            for table, count in batch.extra.get(TABLE_ROWS_KEY, {}).items():
                rows[table] = rows.get(table, 0) + count
        return rows

    def folders_by_table(self, mode: ModeView, warehouse: Folders, batch: Batch) -> dict[str, list[str]]:
        tables = {table: [warehouse.for_table(table).main_dir(part) for part in parts]
                  for table, parts in mode.table_partitions(batch).items()}  # by event time: those touched
        return {**tables, self.config.hive.rejected_table: [warehouse.rejected_dir(batch.partition_values)]}

    def always_counted(self) -> tuple[str, ...]:
        return ()


def shape_of(config: Config) -> JobShape:
    """The job's shape, from its config: the one place that asks whether it has [route] sections."""
    return OneTable(config) if config.routes.implicit else Routed(config)


def planned_tables(batch: Batch, routing: PlanTables | None) -> Batch:
    """A routed job's new batch with each of its topics' tables recorded (`routing`: the topics' now)."""
    if routing is None:
        return batch
    topics = dict.fromkeys(r.topic for r in batch.ranges)
    return replace(batch, tables={topic: list(routing.topics[topic].tables) for topic in topics})
