"""A job is bound to one table, and a table to one job.

The committed offsets in ZooKeeper say which records are loaded; only the table they were loaded
into holds them. If a config change pointed the job at another table or folder, the next batch
would put new rows where the old ones are not (rows diverted, orphan files), and a second job
writing the same table would load every record twice. So:

- the first run records in ZooKeeper the database, table and the folders it writes (the
  binding), and every later run, and every resumed batch, must name the same ones;
- the table records its owner in the table property `etl.owner`: the job's ZooKeeper path. A
  table owned by another job is refused before anything is created or altered;
- a job is moved on purpose with `etl bind --config NEW.ini --execute` (etl.ops.rebind), which updates
  both sides;
- the binding records the tables' file format ([hive] format) too: a table's files are all of one
  format, so a config naming another is refused at every run, even one with nothing to load. The
  metastore says it once more when a table is ensured (`check_format`): a table made by another
  job, or by hand, is stored as it is stored. A Parquet binding is stored as before formats were.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from etl.config.model import HiveFormat
from etl.errors import ConfigError

OWNER_PROPERTY = "etl.owner"


class BindingMismatch(ConfigError):
    """The config names another table or folder than the job is bound to. Nothing was touched.
    `not_loadable`: the topics with committed offsets that the config's routes cannot load, when
    that is why (the run's metrics count them: etl.ops.metrics)."""

    def __init__(self, message: str, not_loadable: tuple[str, ...] = ()):
        super().__init__(message)
        self.not_loadable = not_loadable


@dataclass(frozen=True)
class Target:
    """What a job writes to: the table and the folders (Hive URIs) of it and its rejected table."""

    database: str
    table: str
    location: str
    rejected_location: str
    file_format: HiveFormat = HiveFormat.PARQUET  # the table's; its rejected table's are Parquet

    def describe(self) -> str:
        return f"{self.database}.{self.table} at {self.location}"

    def to_json(self) -> dict:
        raw = asdict(self)
        raw.pop("file_format")
        return {**raw, **format_json(self.file_format)}

    @classmethod
    def from_json(cls, raw: dict) -> "Target":
        return cls(**{**raw, "file_format": HiveFormat(raw.get("file_format", HiveFormat.PARQUET.value))})

    @classmethod
    def of(cls, config, warehouse) -> "Target":
        return cls(config.hive.database, config.hive.the_table, warehouse.hive_uri(warehouse.table_root),
                   warehouse.hive_uri(warehouse.rejected_root), config.hive.format)


def format_json(file_format: HiveFormat) -> dict:
    """A binding's format, as stored: nothing for Parquet, as bindings were before formats."""
    return {} if file_format is HiveFormat.PARQUET else {"file_format": file_format.value}


def format_refusal(tables: str, stored: str, wanted: HiveFormat, key: str) -> BindingMismatch:
    return BindingMismatch(f"{tables} stored as {stored}, but {key} = {wanted.value}: a table's files are all of one "
                           f"format, and its partitions are read as the table is stored. Nothing was touched: "
                           f"restore {key}, or give the job a new table for the new format (`etl bind`)")


def move_hint(config) -> str:
    return (f"If the change is a mistake, restore the config; to move the job on purpose, run "
            f"`etl bind --config {config.path} --execute` (see docs/operating.md, 'Moving a job to another table')")


def check_bound(bound: Target, current: Target, config) -> None:
    if replace(bound, file_format=current.file_format) == current != bound:
        raise format_refusal(f"table {bound.database}.{bound.table} is", bound.file_format.value, current.file_format,
                             "[hive] format")
    if bound != current:
        raise BindingMismatch(f"job {config.job.name} is bound to {bound.describe()} (rejected rows at "
                              f"{bound.rejected_location}), but the config names {current.describe()} (rejected rows "
                              f"at {current.rejected_location}). Its committed offsets describe what was loaded "
                              f"there; nothing was touched. {move_hint(config)}")


def check_plan(batch, current: Target, config) -> None:
    """A batch is resumed into the table it was planned for, or not at all."""
    if batch.target and Target.from_json(batch.target) != current:
        planned = Target.from_json(batch.target)
        raise BindingMismatch(f"batch {batch.batch_id} was planned to write to {planned.describe()}, but the config "
                              f"names {current.describe()}; resuming it there would leave its files split between "
                              f"both. Nothing was touched: restore the config and run again to finish the batch")


def stored_format(input_format: str | None) -> HiveFormat | None:
    """The format of a table whose files the metastore reads with `input_format` (a Hive input
    format class); None for any other (text, Avro, ...)."""
    name = (input_format or "").rsplit(".", 1)[-1].lower()
    return next((f for f in HiveFormat if name.startswith(("mapred" + f.value, f.value))), None)


def check_format(database: str, table: str, input_format: str | None, wanted: HiveFormat, key: str) -> None:
    """A table's files are all of one format: a job whose config names another one than the table
    is stored as is refused, before anything is touched."""
    stored = stored_format(input_format)
    if stored is not wanted:
        raise format_refusal(f"table {database}.{table} is", stored.value if stored else str(input_format), wanted, key)


def check_owner(database: str, table: str, owner: str | None, me: str) -> None:
    if owner is not None and owner != me:
        raise BindingMismatch(f"table {database}.{table} is loaded by another job ({owner}; table "
                              f"property {OWNER_PROPERTY}); this job is {me}. Two jobs loading one table would "
                              f"load their records twice. Nothing was touched: give this job its own table")
