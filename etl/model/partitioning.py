"""The Partitioner seam: which Hive partition a batch's rows land in, and when it is final.

One object decides a table's partition columns, a batch's partition values, their path,
and each partition's time window (what `_SUCCESS` markers wait for). Adding a scheme means
adding a Partitioner here (and naming it in `partitioner_for`), not editing the planner,
the schema check, the markers and the file names.

Today's one scheme is planning time: a batch's rows land in the dt/hour of the moment the
batch was planned, by the driver's clock, UTC. It is fixed in the plan, so a replay lands in
the same folder and one partition-batch is always one file.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Mapping, Protocol, Sequence

from etl.errors import SchemaError
from etl.model.naming import partition_path


@dataclass(frozen=True)
class Window:
    """The time a partition covers; it is final once the window has closed (and no batch is open)."""

    start: dt.datetime
    end: dt.datetime


class Partitioner(Protocol):
    # (name, Hive type) of each partition column, in PARTITIONED BY order
    columns: tuple[tuple[str, str], ...]

    def values_for_plan(self, planned_at: dt.datetime) -> dict[str, str]:
        """The partition values of a batch planned at `planned_at`."""

    def path(self, values: Mapping[str, str]) -> str:
        """The partition's folder below the table root: name=value/..."""

    def window(self, values: Mapping[str, str]) -> Window:
        """The time the partition covers; ValueError when its values name no time."""


class PlanningTimeHourly:
    """dt=YYYY-MM-DD/hour=HH of the batch's planning time, UTC."""

    columns = (("dt", "string"), ("hour", "string"))
    LENGTH = dt.timedelta(hours=1)

    def values_for_plan(self, planned_at: dt.datetime) -> dict[str, str]:
        utc = planned_at.astimezone(dt.timezone.utc)
        return {"dt": utc.strftime("%Y-%m-%d"), "hour": utc.strftime("%H")}

    def path(self, values: Mapping[str, str]) -> str:
        return partition_path(dict(values))

    def window(self, values: Mapping[str, str]) -> Window:
        start = dt.datetime.strptime(f"{values['dt']} {values['hour']}", "%Y-%m-%d %H")
        start = start.replace(tzinfo=dt.timezone.utc)
        return Window(start, start + self.LENGTH)


PLANNING_TIME_HOURLY = PlanningTimeHourly()
SCHEMES: tuple[Partitioner, ...] = (PLANNING_TIME_HOURLY,)


def partitioner_for(where: str, columns: Sequence[tuple[str, str]]) -> Partitioner:
    """The scheme whose columns the DDL declares (name, Hive type), or a SchemaError naming it."""
    declared = tuple((name, hive_type.lower()) for name, hive_type in columns)
    for scheme in SCHEMES:
        if declared == scheme.columns:
            return scheme
    found = ", ".join(f"{name} {hive_type}" for name, hive_type in declared)
    raise SchemaError(f"{where}: PARTITIONED BY ({found}) is not supported; "
                      "the ETL writes hourly partitions: use 'PARTITIONED BY (dt string, hour string)'")
