"""The Hive registrar: creates the tables from their DDL (a file in warehouse_schema/, or one
derived from the Schema Registry: etl.model.table_ddl), evolves them, adds partitions.

Partitions are added only after every file of a batch is in place, with ADD IF NOT EXISTS,
so registering is idempotent and a replay may run it again.

Schema evolution (etl.hive.evolution decides, this module applies): columns added to the
DDL are added to the table with ALTER TABLE ... ADD COLUMNS ... CASCADE semantics. Spark SQL
refuses the CASCADE keyword (PARSE_SYNTAX_ERROR), and its ALTER TABLE ADD COLUMNS changes
only the table: every existing partition keeps its old column list in the metastore, which
Hive itself (unlike Spark, which reads partitions with the table's schema) uses to read the
partition, so new files in an old partition would show NULL for the new column (Confluent's
HDFS connector, #508/#438). So it is done in two steps:
  1. Spark SQL ALTER TABLE ... ADD COLUMNS (...): the table (and Spark's own copy of its
     schema in the table properties);
  2. alterPartitions of Spark's external catalog (through py4j) with every partition as
     listed: Spark rebuilds each Hive partition from the table, whose columns it now takes,
     and sends them in one alter_partitions call to the metastore.
Step 2 is done whenever the table property etl.cascaded_columns does not match the table's
columns, and the property is set after it, so a run that dies between the steps is completed
by the next one.
"""
from __future__ import annotations

import hashlib
import logging
import posixpath
from pathlib import Path
from typing import Any, Callable

from etl.config import HiveConfig
from etl.errors import HiveError, HiveUnavailable, RollupRefused
from etl.hive.catalog import (
    CASCADED_PROPERTY, ROLLUP_PROPERTY, MetastoreCatalog, TableFacts, partition_name, partition_spec,
)
from etl.hive.evolution import IncompatibleSchemaChange, plan_evolution
from etl.hive.sql import quote_identifier, quote_literal
from etl.config.model import HiveFormat
from etl.model.binding import OWNER_PROPERTY, check_format, check_owner
from etl.model.compaction import TableKind
from etl.model.naming import REJECTED_FORMAT, partition_values
from etl.model.rollup_table import PARTIALS_FORMAT, RollupSpec
from etl.model.schema import Column, render_ddl
from etl.model.table_ddl import TableDdl, ddl_file
from etl.sink.warehouse import Warehouse, same_location

log = logging.getLogger(__name__)
# Package data (pyproject.toml), not in warehouse_schema/: a regular install, such as the archive that
# scripts/pack-env ships to a cluster, has the package and nothing else of the repository.
REJECTED_DDL = Path(__file__).resolve().parent / "rejected.sql"
FORMAT_KEY = "[hive] format"
REJECTED_FORMAT_KEY = "the rejected table's format (Parquet for every job)"
NOTHING_CHANGED = "No offset was committed; the next run tries again"
BATCH_STAYS_OPEN = "The batch stays open; the next run registers it again"

ADD_PER_STATEMENT = 500  # partitions per ALTER TABLE ... ADD: a backfill batch may touch thousands
# Up to this many partitions added by a batch are each checked with a metastore call; more are
# checked against one listing of the table's partitions (a backfill's thousands took a round trip
# each: 5,000 partitions spent most of a minute there).
CHECK_ONE_BY_ONE = 50


class HiveRegistrar:
    def __init__(self, catalog: MetastoreCatalog, session: Callable[[], Any], hive: HiveConfig, warehouse: Warehouse,
                 owner: str | None = None):
        """`catalog`: the metastore's reads and partition adds (etl.hive.catalog); `session()`: the
        SparkSession for DDL, started on its first call. `owner`: the job's ZooKeeper path,
        recorded in (and checked against) each table's etl.owner property (etl.model.binding);
        None only for read-only uses."""
        self.catalog, self.session, self.hive, self.warehouse, self.owner = catalog, session, hive, warehouse, owner

    def ensure_tables(self) -> None:
        """Create the database, the table and its rejected companion if they are missing, or
        claim and evolve them. A routed job's registrar (no [hive] table) ensures the database and
        the job's rejected table; each table's view ensures its own (`ensure_table`)."""
        db = self.hive.database
        location = self.warehouse.hive_uri(self.warehouse.database_root)
        if not self._catalog_call(f"look up database {db}", lambda c: c.database_exists(db)):
            self._sql(f"CREATE DATABASE IF NOT EXISTS {quote_identifier(db)} LOCATION {quote_literal(location)}",
                      f"create database {db}")
        if self.hive.table is not None:
            self.ensure_table()
        self._ensure(self.hive.rejected_table, ddl_file(REJECTED_DDL), self.warehouse.rejected_root, REJECTED_FORMAT,
                     REJECTED_FORMAT_KEY)

    def ensure_table(self, ddl: TableDdl | None = None) -> None:
        """Create the table if it is missing, or claim and evolve it, from `ddl`: the writer spec's
        (a registry route's is derived), or else [hive] schema's file."""
        ddl = ddl_file(self.hive.the_schema_file) if ddl is None else ddl
        self._ensure(self.hive.the_table, ddl, self.warehouse.table_root, self.hive.format, FORMAT_KEY)

    def check_claimed(self) -> None:
        """A routed table that compaction acts on and does not ensure (no DDL is needed: a registry
        route's, or a retired route's): refused if another job owns it, never created, claimed or
        evolved. A missing table has no partitions to compact."""
        found = self._read_table(self.hive.the_table)
        if found is not None and self.owner is not None:
            check_owner(self.hive.database, self.hive.the_table, found.owner, self.owner)
        if found is not None:
            check_format(self.hive.database, self.hive.the_table, found.input_format, self.hive.format, FORMAT_KEY)

    def _ensure(self, table: str, ddl: TableDdl, location: str, file_format: HiveFormat, format_key: str) -> None:
        columns = ddl.schema().columns
        found = self._read_table(table)
        if found is not None:
            check_format(self.hive.database, table, found.input_format, file_format, format_key)
            self._claim(table, found)  # before any change: a table another job owns is not touched
            self._evolve(table, ddl, columns, found)
            return
        log.info("creating Hive table %s.%s from %s", self.hive.database, table, ddl.source)
        self._sql(ddl.render(self.hive.database, table, self.warehouse.hive_uri(location), file_format),
                  f"create table {table}")
        created = self._read_table(table)  # as created: a job that created it at the same time claimed it
        if created is None:
            raise HiveError(f"Hive created {self.hive.database}.{table}, then did not find it. {NOTHING_CHANGED}")
        self._claim(table, created)
        self._mark_cascaded(table, columns)  # no partition yet: nothing to cascade to

    def ensure_rollup(self, spec: RollupSpec, loaded: bool) -> None:
        """A rollup's partials table and its view (etl.model.rollup_table), created if missing.
        Refused: a partials table whose files another definition computed, and a new rollup of a
        table that already holds committed rows (`loaded`), which its partials would leave out."""
        found = self._read_table(spec.partials_table)
        self._refuse_rollup(spec, found, loaded)
        table, location = spec.partials_table, posixpath.join(self.warehouse.database_root, spec.partials_table)
        if found is None:
            self._sql(render_ddl(spec.ddl_template(), spec.rollup.describe(), self.hive.database, table,
                                 self.warehouse.hive_uri(location)), f"create table {table}")
            found = self._read_table(table)
            if found is None:
                raise HiveError(f"Hive created {self.hive.database}.{table}, then did not find it. {NOTHING_CHANGED}")
        check_format(self.hive.database, table, found.input_format, PARTIALS_FORMAT, f"{spec.rollup.describe()}'s "
                     f"partials table")
        self._claim(table, found)
        if found.rollup is None:
            self._set_property(table, ROLLUP_PROPERTY, spec.definition)
        self._sql(spec.view_sql(self.hive.database), f"create view {spec.view}")

    def _refuse_rollup(self, spec: RollupSpec, found: TableFacts | None, loaded: bool) -> None:
        rebuild = f"`etl rollup rebuild --rollup {spec.rollup.name} --execute` builds them anew. Nothing was changed"
        if found is None and loaded:
            table = f"[route {spec.rollup.route}]'s table" if spec.rollup.route else "the table"
            raise RollupRefused(f"{spec.rollup.describe()}: {table} already holds rows loaded before the rollup "
                                f"existed, which its partials would leave out; {rebuild}")
        if found is not None and found.rollup not in (None, spec.definition):  # None: created, not yet stamped
            raise RollupRefused(f"{self.hive.database}.{spec.partials_table} holds the partials of another definition "
                                f"of {spec.rollup.describe()} (etl.rollup {found.rollup}, the config's "
                                f"{spec.definition}: its terms or its table changed), which would not add up with "
                                f"new ones; {rebuild}")

    def drop_rollup(self, spec: RollupSpec) -> None:
        """The view and the partials table, gone from the metastore (external: no file is deleted)."""
        self._sql(f"DROP VIEW IF EXISTS {self._qualified(spec.view)}", f"drop view {spec.view}")
        self._sql(f"DROP TABLE IF EXISTS {self._qualified(spec.partials_table)}", f"drop table {spec.partials_table}")

    def add_rollup_partitions(self, spec: RollupSpec, partitions: list[dict[str, str]]) -> None:
        """The partials table's partitions a batch wrote into, as `add_partitions` adds the table's."""
        self._add_missing(spec.partials_table, partitions,
                          [self.warehouse.hive_uri(self.warehouse.partials_dir(spec.partials_table, values))
                           for values in partitions])

    def _read_table(self, table: str) -> TableFacts | None:
        """What ensuring needs of a table, in one metastore call; None if it does not exist."""
        return self._catalog_call(f"look up {table}", lambda c: c.table_facts(self.hive.database, table))

    def _claim(self, table: str, found: TableFacts) -> None:
        if self.owner is None:
            return
        check_owner(self.hive.database, table, found.owner, self.owner)
        if found.owner is None:
            self._set_property(table, OWNER_PROPERTY, self.owner)

    # -- schema evolution -----------------------------------------------------------------
    def _evolve(self, table: str, ddl: TableDdl, columns: tuple[Column, ...], found: TableFacts) -> None:
        try:
            evolution = plan_evolution(f"{self.hive.database}.{table}", ddl.source, found.columns, columns)
        except IncompatibleSchemaChange as exc:
            if not ddl.remedy:
                raise
            raise IncompatibleSchemaChange(f"{exc}. {ddl.remedy}") from exc
        if evolution.is_needed:
            log.warning("schema evolution: %s", evolution.describe())
            added = ", ".join(f"{quote_identifier(c.name)} {c.hive_type}" for c in evolution.added)
            self._sql(f"ALTER TABLE {self._qualified(table)} ADD COLUMNS ({added})",
                      f"add columns to {table}")
        if found.cascaded != columns_fingerprint(columns):
            self._cascade(table)
            self._mark_cascaded(table, columns)

    def _cascade(self, table: str) -> None:
        """Every existing partition takes the table's column list (Hive's CASCADE), through Spark's
        external catalog whichever client reads the metastore."""
        def alter():
            spark = self.session()
            catalog = spark._jsparkSession.sharedState().externalCatalog()
            partitions = catalog.listPartitions(self.hive.database, table, spark._jvm.scala.Option.empty())
            if not partitions.isEmpty():
                catalog.alterPartitions(self.hive.database, table, partitions)
            return partitions.size()
        count = self._catalog_call(f"update the partitions of {table} to its columns", lambda _: alter())
        if count:
            log.warning("schema evolution: %d partitions of %s.%s now have the table's columns (CASCADE)", count,
                        self.hive.database, table)
        self.session().catalog.refreshTable(self._qualified(table))

    def _mark_cascaded(self, table: str, columns: tuple[Column, ...]) -> None:
        self._set_property(table, CASCADED_PROPERTY, columns_fingerprint(columns))

    def _set_property(self, table: str, key: str, value: str) -> None:
        self._sql(f"ALTER TABLE {self._qualified(table)} SET TBLPROPERTIES "
                  f"({quote_literal(key)}={quote_literal(value)})", f"set a property of {table}")

    def _catalog_call(self, what: str, call, then: str = NOTHING_CHANGED):
        """`call(catalog)`; `then`, as for _sql."""
        try:  # the first call also makes the client, which fails when the metastore is down
            return call(self.catalog)
        except Exception as exc:
            raise _failure(exc)(f"Hive could not {what} (metastore {self.hive.metastore}): {_first_line(exc)}. "
                                f"{then}") from exc

    def add_partition(self, partition_values: dict[str, str], with_rejected: bool) -> None:
        self.add_partitions([partition_values], [partition_values] if with_rejected else [])

    def add_partitions(self, main: list[dict[str, str]], rejected: list[dict[str, str]]) -> None:
        """Every partition a batch touched, each checked to point at the folder the job writes it
        to. Those the metastore lacks are added in one ALTER TABLE ... ADD statement per table (per
        ADD_PER_STATEMENT of them). Those it holds (a batch's hour is often an earlier batch's)
        cost a read, not a statement: a routed job registers dozens of tables a batch, and each
        statement took 60 ms."""
        for kind, partitions in ((TableKind.MAIN, main), (TableKind.REJECTED, rejected)):
            if partitions:
                self._add_missing(self._table(kind), partitions,
                                  [self.warehouse.hive_uri(self.warehouse.folder(kind, values))
                                   for values in partitions])

    def _add_missing(self, table: str, partitions: list[dict[str, str]], locations: list[str]) -> None:
        held = self._registered(table, partitions)
        missing = [i for i, where in enumerate(held) if where is None]
        for start in range(0, len(missing), ADD_PER_STATEMENT):
            chunk = missing[start:start + ADD_PER_STATEMENT]
            self._add(table, [partitions[i] for i in chunk], [locations[i] for i in chunk])
        added = dict(zip(missing, self._registered(table, [partitions[i] for i in missing]))) if missing else {}
        for i, (values, location) in enumerate(zip(partitions, locations)):
            self._refuse_elsewhere(table, values, (added[i] if i in added else held[i]) or "", location)

    def _add(self, table: str, partitions: list[dict[str, str]], locations: list[str]) -> None:
        self._catalog_call(_adding(table, partitions),
                           lambda c: c.add_partitions(self.hive.database, table, partitions, locations),
                           BATCH_STAYS_OPEN)

    def _registered(self, table: str, partitions: list[dict[str, str]]) -> list[str | None]:
        """Where the metastore holds each partition (None: it does not), read one by one up to
        CHECK_ONE_BY_ONE partitions, else from one listing of the table's partitions."""
        def read(catalog: MetastoreCatalog):
            if len(partitions) > CHECK_ONE_BY_ONE:
                listed = catalog.all_locations(self.hive.database, table)
                return [listed.get(partition_name(values)) for values in partitions]
            return catalog.locations(self.hive.database, table, partitions)
        return self._catalog_call(_adding(table, partitions), read, BATCH_STAYS_OPEN)

    def location(self, kind: TableKind | str, partition: str) -> str | None:
        """Where the metastore says a partition's files are; None if it is not registered. `kind`:
        the table, or a rollup's partials table by its name."""
        table, values = self._table(kind), partition_values(partition)
        return self._catalog_call(f"read the location of partition {partition} of {table}",
                                  lambda c: c.locations(self.hive.database, table, [values])[0])

    def set_location(self, kind: TableKind | str, partition: str, location: str) -> None:
        """Point a partition at another folder, in one metastore call (etl.compaction.switch)."""
        table, values = self._table(kind), partition_values(partition)
        self._sql(f"ALTER TABLE {self._qualified(table)} PARTITION ({partition_spec(values)}) SET LOCATION "
                  f"{quote_literal(location)}", f"point partition {partition} of {table} at {location}",
                  "The compaction stays WRITTEN; the next run points it again")
        self._check_location(table, values, location)

    def drop_partition(self, kind: TableKind, partition: str) -> None:
        """Forget a partition (etl.ops.legacy_names, once its files have moved). The tables are
        EXTERNAL: the metastore deletes no file."""
        table, values = self._table(kind), partition_values(partition)
        self._sql(f"ALTER TABLE {self._qualified(table)} DROP IF EXISTS PARTITION ({partition_spec(values)})",
                  f"drop partition {partition} of {table}", "The next `etl recover` drops it again")

    def partitions(self, kind: TableKind) -> dict[str, str]:
        """Each partition of the table and its location, as the metastore holds them."""
        return registered_partitions(self.catalog, self.hive, self._table(kind))

    def _table(self, kind: TableKind | str) -> str:
        if not isinstance(kind, TableKind):
            return kind  # a rollup's partials table, moved with its data (etl.model.compaction.PartialsFold)
        return self.hive.the_table if kind is TableKind.MAIN else self.hive.rejected_table

    def _check_location(self, table: str, values: dict[str, str], location: str) -> None:
        """ADD IF NOT EXISTS keeps a partition that exists with another location (an earlier
        warehouse url, a folder moved by hand): its new files would be committed and never shown."""
        registered = self._catalog_call(f"read the location of a partition of {table}",
                                        lambda c: c.locations(self.hive.database, table, [values])[0])
        self._refuse_elsewhere(table, values, registered or "", location)

    def _refuse_elsewhere(self, table: str, values: dict[str, str], registered: str, location: str) -> None:
        if not same_location(registered, location):
            name = "/".join(f"{k}={v}" for k, v in values.items())
            raise HiveError(f"partition {name} of {self.hive.database}.{table} is registered at {registered}, "
                            f"but this job writes it to {location}: queries would not show the batch's rows. "
                            f"Move the partition's files to one folder and point the partition at it (ALTER "
                            f"TABLE ... PARTITION (...) SET LOCATION '...'); the batch stays open and the next "
                            f"run registers it again")

    def _qualified(self, table: str) -> str:
        return f"{quote_identifier(self.hive.database)}.{quote_identifier(table)}"

    def _sql(self, statement: str, what: str, then: str = NOTHING_CHANGED) -> None:
        """Runs one statement; `then` tells the operator where a failure leaves the job."""
        try:
            self.session().sql(statement)
        except Exception as exc:
            raise _failure(exc)(f"Hive could not {what} (metastore {self.hive.metastore}): {_first_line(exc)}. "
                                f"{then}") from exc


def _adding(table: str, partitions: list[dict[str, str]]) -> str:
    """What adding partitions does, as an error names it."""
    more = f" and {len(partitions) - 1} more" if len(partitions) > 1 else ""
    return f"add partition ({partition_spec(partitions[0])}){more} to {table}"


def columns_fingerprint(columns: tuple[Column, ...]) -> str:
    text = ",".join(f"{c.name.lower()} {c.hive_type}" for c in columns)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# What Spark's Hive client says when the metastore does not answer, as opposed to refusing a
# statement: a later run gets past the first, an operator must look at the second.
_UNREACHABLE = ("TTransportException", "ConnectException", "Connection refused", "SocketTimeoutException",
                "Read timed out", "connect timed out", "Could not connect to meta store",
                "Unable to instantiate org.apache.hadoop.hive", "UnknownHostException")


def _failure(exc: Exception) -> type[HiveError]:
    """HiveUnavailable (exit 75) when the metastore did not answer, else HiveError (exit 1)."""
    if isinstance(exc, HiveUnavailable):
        return HiveUnavailable
    text = str(exc)
    return HiveUnavailable if any(marker in text for marker in _UNREACHABLE) else HiveError


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def registered_partitions(catalog: MetastoreCatalog, hive: HiveConfig, table: str) -> dict[str, str]:
    """Every partition of the table and its location, a metastore that fails as the ETL's error:
    HiveUnavailable (exit 75) when it did not answer."""
    try:
        return catalog.all_locations(hive.database, table)
    except Exception as exc:
        raise _failure(exc)(f"cannot list the partitions of {hive.database}.{table} (metastore {hive.metastore}): "
                            f"{_first_line(exc)}") from exc
