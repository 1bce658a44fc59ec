"""A table's DDL template, wherever it comes from: a file in warehouse_schema/ (`ddl_file`), or
derived from a writer schema's fields (`derived_ddl`, for a route with `schema = registry`).

Either is one text with ${database}, ${table} and ${location}, which the writer spec reads its
columns from and the registrar creates and evolves the table from (etl.hive.evolution), so that
a derived table is made and evolved exactly as a written one. `source` names it in messages.

A table is stored as its job's [hive] format says: a derived DDL says so; a DDL file that names
no format is given that one's STORED AS clause when the table is made (Hive would otherwise make
a text table, which no file the job writes is); one that names another format is refused at
start-up, before anything is made (`check_stored_as`).

`field_columns` is the one rule that maps a writer schema's fields to columns: `etl schema
suggest` prints what it finds, and a registry route's table is made of it. A derived table has
the lineage columns first, then the key column, then one column per field in the schema's
order: a field added at the end of the record is a column added at the end of the table.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from etl.config import HIVE_NAME_RE
from etl.config.model import HiveFormat
from etl.errors import SchemaError
from etl.model.schema import (LINEAGE_COLUMNS, Column, TableSchema, parse_table_schema, read_template, render_ddl,
                              without_comments)

# The partitions of a derived table when the job has no DDL file to follow: the hourly default.
DEFAULT_PARTITIONS = (Column("dt", "string"), Column("hour", "string"))
NO_COLUMN_TYPE = "no column type holds it (nested records, arrays and maps)"
NOT_A_COLUMN_NAME = "not a valid Hive column name"
FILLED_BY_ETL = "the ETL fills the column of that name"
_STORED_AS_RE = re.compile(r"\bSTORED\s+AS\s+(\w+)", re.IGNORECASE)
_LOCATION_RE = re.compile(r"\bLOCATION\s+'\$\{location\}'", re.IGNORECASE)
_QUOTED_RE = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")  # a COMMENT may say anything


@dataclass(frozen=True)
class TableDdl:
    template: str  # CREATE TABLE ... with ${database}, ${table} and ${location}
    source: str  # what messages name: the file, or the subject and route it was derived for
    remedy: str = ""  # what to do when evolution refuses it, said after the refusal: a derived DDL's

    def schema(self, key_column: str | None = None) -> TableSchema:
        """The table's columns (SchemaError, naming `source`, when the template cannot be used)."""
        return parse_table_schema(self.template, self.source, key_column)

    def render(self, database: str, table: str, location: str, file_format: HiveFormat) -> str:
        """The DDL to run, stored as `file_format` (checked against its own clause by `check_stored_as`)."""
        template = self.template
        if not self._stored_as():  # said before LOCATION, in the text without comments (one may say LOCATION too)
            template = _LOCATION_RE.sub(lambda m: f"STORED AS {file_format.value.upper()}\n{m[0]}",
                                        without_comments(template), count=1)
        return render_ddl(template, self.source, database, table, location)

    def check_stored_as(self, file_format: HiveFormat, key: str) -> None:
        """SchemaError if the DDL stores the table as another format than `file_format`, which `key`
        (the config's [hive] format) chose: the job writes its files in that format only."""
        found = self._stored_as()
        wanted = file_format.value.upper()
        if found in ([], [wanted]):
            return
        said = f"says STORED AS {found[0]}" if len(found) == 1 else f"has {len(found)} STORED AS clauses"
        raise SchemaError(f"{self.source} {said}, but {key} = {file_format.value}: the job writes its files as "
                          f"{wanted}. Make the DDL say STORED AS {wanted} (or nothing), or set the key to the "
                          f"table's format")

    def _stored_as(self) -> list[str]:
        return [name.upper() for name in _STORED_AS_RE.findall(_QUOTED_RE.sub("''", without_comments(self.template)))]


def ddl_file(path: str | Path) -> TableDdl:
    """A DDL file's template (SchemaError when it cannot be read)."""
    return TableDdl(read_template(path), str(path))


def field_columns(fields: Iterable[tuple[str, str | None]], reserved: Iterable[str] = ()
                  ) -> tuple[tuple[Column, ...], tuple[tuple[str, str], ...]]:
    """(columns, (field, why) of the fields no column holds) of a writer schema's fields, each
    with the Hive type that would hold it (None: none does). `reserved`: column names taken
    already, whose fields are left out without a word (the table has them)."""
    taken = {name.lower() for name in reserved}
    columns, unmapped = [], []
    for field, hive_type in fields:
        name = field.lower()
        if name in taken:
            continue
        if hive_type is None:
            unmapped.append((field, NO_COLUMN_TYPE))
        elif not HIVE_NAME_RE.match(name):
            unmapped.append((field, NOT_A_COLUMN_NAME))
        else:
            columns.append(Column(name, hive_type))
            taken.add(name)
    return tuple(columns), tuple(unmapped)


def derived_ddl(fields: Iterable[tuple[str, str | None]], partitions: tuple[Column, ...], key_column: str | None,
                source: str, file_format: HiveFormat) -> tuple[TableDdl, tuple[tuple[str, str], ...]]:
    """The DDL of a table derived from a writer schema's fields, and the fields it leaves out
    (a field named as a lineage or key column among them: the ETL fills that column). `source`
    names the schema, which a refused evolution is told to restore (TableDdl.remedy)."""
    fixed = LINEAGE_COLUMNS + ((Column(key_column, "string"),) if key_column else ())
    columns, unmapped = field_columns(fields)
    clashing = {c.name for c in fixed}
    left_out = tuple((c.name, FILLED_BY_ETL) for c in columns if c.name in clashing)
    listed = fixed + tuple(c for c in columns if c.name not in clashing)
    template = "\n".join([
        f"-- derived from {source}",
        "CREATE EXTERNAL TABLE IF NOT EXISTS ${database}.${table} (",
        ",\n".join(f"  `{c.name}` {c.hive_type}" for c in listed),
        ")",
        "PARTITIONED BY (" + ", ".join(f"`{c.name}` {c.hive_type}" for c in partitions) + ")",
        f"STORED AS {file_format.value.upper()}",
        "LOCATION '${location}'",
    ])
    remedy = (f"That DDL is derived from {source} (schema = registry): register a schema version that keeps the "
              f"table's columns as they are (a new field for a new type), or give the route a new table or a DDL file")
    return TableDdl(template, source, remedy), unmapped + left_out
