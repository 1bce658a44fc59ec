"""The metastore as the registrar reads it and adds partitions to it, behind one seam: Spark's
Hive client through py4j (`SparkCatalog`), or a Thrift client in the driver
(etl.hive.thrift_catalog), which [hive] metastore_client chooses.

Only reads and ADD IF NOT EXISTS go through here: a scheduled run on tables that exist makes no
other metastore call, and with the Thrift client it then starts no SparkSession and no Hive
client in the JVM (1.0-1.2 s of a run, docs/performance.md). Creating and evolving a table,
pointing or dropping a partition stay Spark SQL statements (etl.hive.registrar).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

from etl.hive.sql import quote_identifier, quote_literal
from etl.model.binding import OWNER_PROPERTY
from etl.model.schema import Column, normalise_hive_type

CASCADED_PROPERTY = "etl.cascaded_columns"
ROLLUP_PROPERTY = "etl.rollup"  # a rollup's partials table: the definition its files were computed by


@dataclass(frozen=True)
class TableFacts:
    """A table as the metastore holds it: its data columns, the two properties the job keeps, and
    the input format its files are read with."""
    columns: tuple[Column, ...]
    owner: str | None  # etl.owner (etl.model.binding)
    cascaded: str | None  # etl.cascaded_columns
    input_format: str | None = None  # e.g. org.apache.hadoop.hive.ql.io.orc.OrcInputFormat
    rollup: str | None = None  # etl.rollup, on a rollup's partials table (etl.model.rollup_table)


class MetastoreCatalog(Protocol):
    """What the registrar asks of the metastore besides its DDL. A failure raises whatever the
    client raises: the registrar names the call and sorts it (HiveUnavailable or HiveError)."""

    def database_exists(self, database: str) -> bool: ...

    def table_facts(self, database: str, table: str) -> TableFacts | None:
        """None: no such table."""

    def locations(self, database: str, table: str, partitions: list[dict[str, str]]) -> list[str | None]:
        """Where each partition is registered, in one call each (None: it is not)."""

    def all_locations(self, database: str, table: str) -> dict[str, str]:
        """Every partition (`dt=2026-11-21/hour=10`) and its location; a missing table has none."""

    def add_partitions(self, database: str, table: str, partitions: list[dict[str, str]],
                       locations: list[str]) -> None:
        """Each partition at its location, unless the metastore holds it already (IF NOT EXISTS)."""


def partition_name(values: dict[str, str]) -> str:
    return "/".join(f"{k}={v}" for k, v in values.items())


def partition_spec(values: dict[str, str]) -> str:
    return ", ".join(f"{quote_identifier(k)}={quote_literal(v)}" for k, v in values.items())


class SparkCatalog:
    """Spark's external catalog (its Hive client), through py4j, on the session `session()` starts."""

    def __init__(self, session: Callable[[], object]):
        self._session = session

    @property
    def _spark(self):
        return self._session()

    def _catalog(self):
        return self._spark._jsparkSession.sharedState().externalCatalog()

    def database_exists(self, database: str) -> bool:
        return self._catalog().databaseExists(database)  # not SQL: its parser costs 1 s

    def table_facts(self, database: str, table: str) -> TableFacts | None:
        """One metastore call (Spark's catalog.listColumns alone took 100 ms a table). Its
        properties are as stored: SHOW TBLPROPERTIES would redact a value that looks secret (a
        job path with 'url' or 'token' in it). A column's type is its catalog string, as
        spark.catalog.listColumns gives it (a varchar column's may read as string: both
        normalise to string)."""
        found = self._catalog().getTablesByName(database, self._spark._jvm.PythonUtils.toSeq([table]))
        return _spark_table_facts(found.apply(0), f"{database}.{table}") if found.size() else None

    def locations(self, database: str, table: str, partitions: list[dict[str, str]]) -> list[str | None]:
        catalog, to_map = self._catalog(), self._spark._jvm.PythonUtils.toScalaMap
        found = [catalog.getPartitionOption(database, table, to_map(values)) for values in partitions]
        return [f.get().location().toString() if f.isDefined() else None for f in found]

    def all_locations(self, database: str, table: str) -> dict[str, str]:
        return partition_locations(self._spark, database, table)

    def add_partitions(self, database: str, table: str, partitions: list[dict[str, str]],
                       locations: list[str]) -> None:
        clauses = [f"PARTITION ({partition_spec(values)}) LOCATION {quote_literal(location)}"
                   for values, location in zip(partitions, locations)]
        self._spark.sql(f"ALTER TABLE {quote_identifier(database)}.{quote_identifier(table)} ADD IF NOT EXISTS "
                        f"{' '.join(clauses)}")


def _spark_table_facts(table, name: str) -> TableFacts:
    """From Spark's CatalogTable (through py4j)."""
    def prop(key: str) -> str | None:
        found = table.properties().get(key)
        return found.get() if found.isDefined() else None
    columns = tuple(Column(f.name().lower(), normalise_hive_type(f.dataType().catalogString(), name))
                    for f in table.dataSchema().fields())
    input_format = table.storage().inputFormat()
    return TableFacts(columns, prop(OWNER_PROPERTY), prop(CASCADED_PROPERTY),
                      input_format.get() if input_format.isDefined() else None, prop(ROLLUP_PROPERTY))


def table_exists(spark, database: str, table: str) -> bool:
    return spark.catalog.tableExists(f"{quote_identifier(database)}.{quote_identifier(table)}")


def partition_locations(spark, database: str, table: str) -> dict[str, str]:
    """Each partition of the table (`dt=2026-11-21/hour=10`) and the location the metastore holds
    for it, in one metastore call. A missing table has none."""
    if not table_exists(spark, database, table):
        return {}
    catalog = spark._jsparkSession.sharedState().externalCatalog()
    columns = catalog.getTable(database, table).partitionColumnNames()
    names = [columns.apply(i) for i in range(columns.size())]
    partitions = catalog.listPartitions(database, table, spark._jvm.scala.Option.empty())
    found = {}
    for index in range(partitions.size()):
        partition = partitions.apply(index)
        found["/".join(f"{name}={partition.spec().apply(name)}" for name in names)] = partition.location().toString()
    return found
