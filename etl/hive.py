"""The Hive registrar: creates the tables from warehouse_schema/ and adds partitions.

Partitions are added only after every file of a batch is in place, with ADD IF NOT EXISTS,
so registering is idempotent and a replay may run it again.
"""
from __future__ import annotations

import logging
from pathlib import Path

from etl.config import HiveConfig
from etl.errors import HiveError
from etl.naming import partition_dir
from etl.schema import render_ddl
from etl.warehouse import Warehouse

log = logging.getLogger(__name__)
REJECTED_DDL = Path(__file__).resolve().parent.parent / "warehouse_schema" / "rejected.sql"


class HiveRegistrar:
    def __init__(self, spark, hive: HiveConfig, warehouse: Warehouse):
        self.spark, self.hive, self.warehouse = spark, hive, warehouse

    def ensure_tables(self) -> None:
        """Create the database, the table and its rejected companion if they are missing."""
        db = self.hive.database
        location = self.warehouse.hive_uri(self.warehouse.database_root)
        self._sql(f"CREATE DATABASE IF NOT EXISTS `{db}` LOCATION '{location}'", f"create database {db}")
        self._ensure(self.hive.table, self.hive.schema_file, self.warehouse.table_root)
        self._ensure(self.hive.rejected_table, REJECTED_DDL, self.warehouse.rejected_root)

    def _ensure(self, table: str, ddl_file: Path, location: str) -> None:
        if self._table_exists(table):
            return
        log.info("creating Hive table %s.%s from %s", self.hive.database, table, ddl_file)
        ddl = render_ddl(ddl_file, self.hive.database, table, self.warehouse.hive_uri(location))
        self._sql(ddl, f"create table {table}")

    def _table_exists(self, table: str) -> bool:
        try:
            return self.spark.catalog.tableExists(f"`{self.hive.database}`.`{table}`")
        except Exception as exc:
            raise HiveError(f"cannot reach the Hive metastore ({self.hive.metastore}) to look up "
                            f"{self.hive.database}.{table}: {_first_line(exc)}") from exc

    def add_partition(self, partition_values: dict[str, str], with_rejected: bool) -> None:
        self._add(self.hive.table, self.warehouse.table_root, partition_values)
        if with_rejected:
            self._add(self.hive.rejected_table, self.warehouse.rejected_root, partition_values)

    def _add(self, table: str, root: str, values: dict[str, str]) -> None:
        spec = ", ".join(f"{k}='{v}'" for k, v in values.items())
        location = self.warehouse.hive_uri(partition_dir(root, values))
        self._sql(f"ALTER TABLE `{self.hive.database}`.`{table}` ADD IF NOT EXISTS PARTITION ({spec}) "
                  f"LOCATION '{location}'", f"add partition ({spec}) to {table}")

    def _sql(self, statement: str, what: str) -> None:
        try:
            self.spark.sql(statement)
        except Exception as exc:
            raise HiveError(f"Hive could not {what} (metastore {self.hive.metastore}): {_first_line(exc)}. "
                            f"The batch stays open; the next run registers it again") from exc


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
