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
  both sides.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

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

    def describe(self) -> str:
        return f"{self.database}.{self.table} at {self.location}"

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: dict) -> "Target":
        return cls(**raw)

    @classmethod
    def of(cls, config, warehouse) -> "Target":
        return cls(config.hive.database, config.hive.the_table, warehouse.hive_uri(warehouse.table_root),
                   warehouse.hive_uri(warehouse.rejected_root))


def move_hint(config) -> str:
    return (f"If the change is a mistake, restore the config; to move the job on purpose, run "
            f"`etl bind --config {config.path} --execute` (see docs/operating.md, 'Moving a job to another table')")


def check_bound(bound: Target, current: Target, config) -> None:
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


def check_owner(database: str, table: str, owner: str | None, me: str) -> None:
    if owner is not None and owner != me:
        raise BindingMismatch(f"table {database}.{table} is loaded by another job ({owner}; table "
                              f"property {OWNER_PROPERTY}); this job is {me}. Two jobs loading one table would "
                              f"load their records twice. Nothing was touched: give this job its own table")
