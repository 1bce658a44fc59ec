"""Schema evolution: what it takes to bring an existing Hive table to its DDL template.

warehouse_schema/ is the source of truth. At start-up the registrar compares the Hive
table's columns with the DDL's (pure, here) and applies the result (etl.hive.registrar):
  - columns the DDL adds at the end of its column list are added to the table and, with
    CASCADE semantics, to every existing partition, so that old files read them as NULL and
    new files' values are seen;
  - anything else (a dropped or renamed column, a changed type, existing columns in another
    order, e.g. a reordered lineage column, or a new column put between existing ones) is
    refused, naming the column and what to do.

Only additions are safe: files already written stay as they are, and Parquet is read by
column name, so a column missing from an old file is NULL, while a dropped, renamed or
retyped column would make old files unreadable or silently wrong. Additions go at the end
because the metastore refuses to move existing columns to other positions (its
hive.metastore.disallow.incompatible.col.type.changes check, on by default, compares types
position by position), as Hive's own ADD COLUMNS only ever appends.
"""
from __future__ import annotations

from dataclasses import dataclass

from etl.errors import SchemaError
from etl.model.schema import Column


class IncompatibleSchemaChange(SchemaError):
    """The DDL changed in a way Hive tables holding files cannot follow. Exit 2: the fix is in
    the DDL (the config), nothing was touched, and a rerun without a fix fails the same way."""


@dataclass(frozen=True)
class Evolution:
    table: str
    added: tuple[Column, ...]  # in DDL order, after the existing columns
    columns: tuple[Column, ...]  # the table's new column list: the DDL's

    @property
    def is_needed(self) -> bool:
        return bool(self.added)

    def describe(self) -> str:
        added = ", ".join(f"{c.name} {c.hive_type}" for c in self.added)
        return f"{self.table}: add column(s) {added}"


def plan_evolution(table: str, ddl_file: str, hive: tuple[Column, ...], ddl: tuple[Column, ...]) -> Evolution:
    """What to change so that `hive` (the table's columns now) becomes `ddl`, or raise
    IncompatibleSchemaChange. Names compare case-insensitively, as Hive's do."""
    wanted = {c.name.lower(): c for c in ddl}
    for position, column in enumerate(hive):
        _check_kept(table, ddl_file, column, wanted.get(column.name.lower()), _renamed_to(hive, ddl, position))
    _check_order(table, ddl_file, hive, ddl)
    return Evolution(table, tuple(ddl[len(hive):]), ddl)


def _check_kept(table: str, ddl_file: str, column: Column, in_ddl: Column | None, renamed_to: str | None) -> None:
    if in_ddl is None:
        guess = f" (renamed to '{renamed_to}'?)" if renamed_to else ""
        raise IncompatibleSchemaChange(
            f"Hive table {table} has column '{column.name} {column.hive_type}', which {ddl_file} no longer "
            f"declares{guess}. Dropping or renaming a column is refused: files already written hold it under "
            f"that name. Put '{column.name} {column.hive_type}' back in the DDL (leave it NULL if it is no longer "
            f"filled); to really drop or rename it, create a new table ([hive] table) and copy the data over")
    if in_ddl.hive_type != column.hive_type:
        raise IncompatibleSchemaChange(
            f"column '{column.name}' of Hive table {table} is {column.hive_type}, but {ddl_file} declares it "
            f"{in_ddl.hive_type}. Changing a column's type is refused: files already written hold "
            f"{column.hive_type} values. Restore '{column.name} {column.hive_type}' in the DDL, or add a new "
            f"column with the new type and fill that one")


def _renamed_to(hive: tuple[Column, ...], ddl: tuple[Column, ...], position: int) -> str | None:
    """The DDL column that took a dropped column's place, when there is one: likely a rename."""
    if position >= len(ddl):
        return None
    present = {c.name.lower() for c in hive}
    candidate = ddl[position]
    return candidate.name if candidate.name.lower() not in present else None


def _check_order(table: str, ddl_file: str, hive: tuple[Column, ...], ddl: tuple[Column, ...]) -> None:
    """The table's columns stay first and in their order; new ones follow them."""
    present = {c.name.lower() for c in hive}
    for index, (was, now) in enumerate(zip(hive, ddl)):
        if was.name.lower() == now.name.lower():
            continue
        if now.name.lower() not in present:
            raise IncompatibleSchemaChange(
                f"{ddl_file} puts new column '{now.name}' between existing columns of Hive table {table} "
                f"(before '{was.name}'). Hive adds columns only after the existing ones: move "
                f"'{now.name} {now.hive_type}' to the end of the column list, after '{hive[-1].name}'")
        before = f"after '{hive[index - 1].name}'" if index else "first"
        raise IncompatibleSchemaChange(
            f"{ddl_file} moves existing column '{now.name}' of Hive table {table}: Hive has '{was.name}' {before}. "
            f"Reordering existing columns (lineage columns included) is refused: keep them in the table's order "
            f"and add new columns at the end")
