"""A table's columns, read from its Hive DDL template in warehouse_schema/.

The template is the single source of truth: Hive creates the table from it (render_ddl) and
the ETL derives the Parquet file schema from it (load_table_schema + arrow_schema), so the
two cannot drift apart. Each table carries the Kafka lineage columns, which the ETL fills.
Its partition columns, which Hive keeps in the directory names, not in the files, are (dt, hour)
or (dt) alone: they choose the table's partitioner (etl.model.partitioning.partitioner_for).
This module reads the template file (read_template: the model room's one file read); the rest is
pure, and takes a template's text wherever it came from (etl.model.table_ddl).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from etl.config import HIVE_NAME_RE
from etl.errors import SchemaError
from etl.model.partitioning import TimePartitioner, partitioner_for


@dataclass(frozen=True)
class Column:
    name: str
    hive_type: str  # normalised: lower case, no blanks, varchar(n)/char(n) read as string


LINEAGE_COLUMNS = (
    Column("kafka_topic", "string"),
    Column("kafka_partition", "int"),
    Column("kafka_offset", "bigint"),
    Column("kafka_timestamp", "timestamp"),
)
REJECTED_COLUMNS = LINEAGE_COLUMNS + (
    Column("kafka_key", "binary"),
    Column("raw_value", "binary"),
    Column("error", "string"),
    # Last, so that schema evolution can add it to rejected tables created before it.
    Column("kafka_timestamp_ms", "bigint"),
)
KEY_COLUMN_TYPES = ("string", "binary")
PLACEHOLDERS = ("database", "table", "location")

_SIMPLE_TYPES = {
    "string": pa.string(),
    "boolean": pa.bool_(),
    "tinyint": pa.int8(),
    "smallint": pa.int16(),
    "int": pa.int32(),
    "bigint": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "date": pa.date32(),
    # Milliseconds: what Kafka timestamps carry; files store them as INT96 for Hive 2.x, or as
    # INT64 microseconds for a table of current readers (etl.sink.layout).
    "timestamp": pa.timestamp("ms"),
    "binary": pa.binary(),
}
_SUPPORTED_TYPES_TEXT = ", ".join([*_SIMPLE_TYPES, "varchar(n)", "char(n)", "decimal(p,s)"])
_DECIMAL_RE = re.compile(r"decimal(?:\((\d+)(?:,(\d+))?\))?")
_CHAR_RE = re.compile(r"(?:var)?char\(\d+\)")
# Literals and comments are single tokens, so that a comma, bracket or "--" inside
# COMMENT '...' never counts as structure.
_TOKEN_RE = re.compile(r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|`[^`]*`|--[^\n]*|[^'"`\-(),<>]+|.""", re.S)
_CREATE_RE = re.compile(
    r"\bCREATE\s+(?:EXTERNAL\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?[^\s(]+\s*\(", re.I
)
_PARTITIONED_RE = re.compile(r"\bPARTITIONED\s+BY\s*\(", re.I)
_COLUMN_RE = re.compile(
    r"\s*(?P<name>[A-Za-z_][A-Za-z0-9_]*|`[A-Za-z0-9_]+`)\s+(?P<type>.+?)"
    r"(?:\s+COMMENT\s+(?:'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"))?\s*",
    re.S | re.I,
)
_PLACEHOLDER_RE = re.compile(r"\$\{([^}]*)\}")


@dataclass(frozen=True)
class TableSchema:
    columns: tuple[Column, ...]  # in DDL order: the order of the Parquet file's columns
    partition_columns: tuple[Column, ...]
    key_column: str | None = None  # the column that receives the Kafka record key

    @property
    def data_columns(self) -> tuple[Column, ...]:
        """The columns the decoder fills: all but the lineage and key columns."""
        filled_by_etl = {c.name for c in LINEAGE_COLUMNS} | {self.key_column}
        return tuple(c for c in self.columns if c.name not in filled_by_etl)

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def partitioner(self) -> TimePartitioner:
        """The scheme of this table's partitions (checked when the DDL was loaded)."""
        return partitioner_for("the table", [(c.name, c.hive_type) for c in self.partition_columns])

    def column(self, name: str) -> Column:
        for column in self.columns:
            if column.name == name:
                return column
        raise KeyError(name)

    def without_columns(self, names) -> "TableSchema":
        """The same table less some columns: what a decoder fills when enrichment fills the rest."""
        dropped = set(names)
        return TableSchema(tuple(c for c in self.columns if c.name not in dropped), self.partition_columns,
                           self.key_column)


def load_table_schema(path: str | Path, key_column: str | None = None) -> TableSchema:
    """Parse and validate a DDL template file. Raises SchemaError saying what to change."""
    return parse_table_schema(read_template(path), path, key_column)


def parse_table_schema(template: str, path: str | Path, key_column: str | None = None) -> TableSchema:
    """Parse and validate a DDL template's text; `path` names it in errors (a file, or a derived DDL's source)."""
    text = without_comments(template)
    columns_text, after_columns = _column_list(path, text)
    columns = _parse_columns(path, columns_text)
    partitions = _parse_columns(path, _partition_list(path, text, after_columns))
    _check_no_duplicates(path, columns + partitions)
    _check_lineage(path, columns)
    _check_key_column(path, columns, key_column)
    _check_partitions(path, partitions)
    return TableSchema(columns, partitions, key_column)


def render_ddl(template: str, path: str | Path, database: str, table: str, location: str) -> str:
    """The template's text with its placeholders filled in, ready to run on Hive; `path` names it."""
    values = {"database": database, "table": table, "location": location}
    _check_placeholders(path, template)
    _check_placeholder_values(path, values)
    # One pass, so that a value is never itself searched for placeholders.
    return _PLACEHOLDER_RE.sub(lambda m: values[m[1]], template)


def normalise_hive_type(raw: str, where: str) -> str:
    """A type as Hive or Spark reports it (e.g. 'varchar(20)', 'decimal(10,2)'), normalised as
    Column.hive_type is; a type the ETL cannot write is kept as written, lower-cased."""
    try:
        return _normalise_type(where, "?", raw)
    except SchemaError:
        return re.sub(r"\s+", "", raw).lower()


def arrow_type(hive_type: str) -> pa.DataType:
    """The Arrow type of a normalised Hive type (Column.hive_type)."""
    if hive_type in _SIMPLE_TYPES:
        return _SIMPLE_TYPES[hive_type]
    decimal = _DECIMAL_RE.fullmatch(hive_type)
    if decimal:
        return pa.decimal128(int(decimal[1]), int(decimal[2]))
    raise SchemaError(f"Hive type {hive_type!r} is not supported; use one of {_SUPPORTED_TYPES_TEXT}")


def arrow_schema(schema: TableSchema) -> pa.Schema:
    """The Parquet file schema: every column in DDL order, without the partition columns."""
    return _arrow_schema_of(schema.columns)


def data_arrow_schema(schema: TableSchema) -> pa.Schema:
    """The schema of what a decoder produces: the data columns in DDL order."""
    return _arrow_schema_of(schema.data_columns)


def rejected_arrow_schema() -> pa.Schema:
    """The file schema of the <table>_rejected companion table (etl/hive/rejected.sql)."""
    return _arrow_schema_of(REJECTED_COLUMNS)


def _arrow_schema_of(columns: tuple[Column, ...]) -> pa.Schema:
    return pa.schema([pa.field(c.name, arrow_type(c.hive_type)) for c in columns])


def read_template(path: str | Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SchemaError(f"cannot read schema file {path}: {exc}; check [hive] schema in the config") from exc


def without_comments(text: str) -> str:
    """A DDL's text without its -- comments (strings and quoted names kept whole)."""
    return "".join(t[0] for t in _TOKEN_RE.finditer(text) if not t[0].startswith("--"))


def _column_list(path: str | Path, text: str) -> tuple[str, int]:
    """The text between CREATE TABLE name ( and its matching ), and where it ends."""
    create = _CREATE_RE.search(text)
    if not create:
        raise SchemaError(
            f"{path}: no 'CREATE [EXTERNAL] TABLE [IF NOT EXISTS] ${{database}}.${{table}} (' found; "
            "start the file with a CREATE TABLE statement listing the columns"
        )
    return _bracketed(path, text, create.end() - 1)


def _partition_list(path: str | Path, text: str, start: int) -> str:
    partitioned = _PARTITIONED_RE.search(text, start)
    if not partitioned:
        raise SchemaError(f"{path}: PARTITIONED BY is missing; add 'PARTITIONED BY (dt string, hour string)'")
    return _bracketed(path, text, partitioned.end() - 1)[0]


def _bracketed(path: str | Path, text: str, open_at: int) -> tuple[str, int]:
    """The text inside the bracket opening at text[open_at], and the index after its match."""
    depth = 0
    for token in _TOKEN_RE.finditer(text, open_at):
        depth += {"(": 1, ")": -1}.get(token[0], 0)
        if depth == 0:
            return text[open_at + 1:token.start()], token.end()
    raise SchemaError(f"{path}: the '(' at character {open_at} is never closed; add the missing ')'")


def _split_top_level(text: str) -> list[str]:
    """Split at commas outside brackets, so that decimal(10,2) stays one item."""
    items, depth, start = [], 0, 0
    for token in _TOKEN_RE.finditer(text):
        depth += {"(": 1, "<": 1, ")": -1, ">": -1}.get(token[0], 0)
        if token[0] == "," and depth == 0:
            items.append(text[start:token.start()])
            start = token.end()
    items.append(text[start:])
    return items


def _parse_columns(path: str | Path, text: str) -> tuple[Column, ...]:
    return tuple(_parse_column(path, item) for item in _split_top_level(text))


def _parse_column(path: str | Path, item: str) -> Column:
    match = _COLUMN_RE.fullmatch(item)
    if not match:
        raise SchemaError(
            f"{path}: cannot read column definition {item.strip()!r}; "
            "write it as: name type [COMMENT 'text'], with a plain name (letters, digits, _)"
        )
    name = match["name"].strip("`")
    return Column(name, _normalise_type(path, name, match["type"]))


def _normalise_type(path: str | Path, name: str, raw: str) -> str:
    hive_type = re.sub(r"\s+", "", raw).lower()
    if hive_type in _SIMPLE_TYPES:
        return hive_type
    if hive_type == "integer":
        return "int"
    if _CHAR_RE.fullmatch(hive_type):
        return "string"
    decimal = _DECIMAL_RE.fullmatch(hive_type)
    if decimal:
        return _normalise_decimal(path, name, decimal)
    raise SchemaError(
        f"{path}: column '{name}' has type {raw.strip()!r}, which the ETL cannot write; "
        f"use one of {_SUPPORTED_TYPES_TEXT} (keep nested JSON in a string column)"
    )


def _normalise_decimal(path: str | Path, name: str, decimal: re.Match) -> str:
    # Hive's bare DECIMAL means decimal(10,0).
    precision = int(decimal[1] or 10)
    scale = int(decimal[2] or 0)
    if not 1 <= precision <= 38 or scale > precision:
        raise SchemaError(
            f"{path}: column '{name}' is decimal({precision},{scale}); "
            "Hive needs 1 <= precision <= 38 and scale <= precision"
        )
    return f"decimal({precision},{scale})"


def _check_no_duplicates(path: str | Path, columns: tuple[Column, ...]) -> None:
    seen: dict[str, str] = {}
    for column in columns:
        # Hive lower-cases column names, so Id and id are the same column.
        key = column.name.lower()
        if key in seen:
            raise SchemaError(
                f"{path}: column '{column.name}' is defined twice (Hive ignores case: '{seen[key]}'); "
                "rename or remove one of them"
            )
        seen[key] = column.name


def _check_lineage(path: str | Path, columns: tuple[Column, ...]) -> None:
    types = {c.name: c.hive_type for c in columns}
    for required in LINEAGE_COLUMNS:
        if required.name not in types:
            raise SchemaError(
                f"{path}: lineage column '{required.name}' is missing; "
                f"add '{required.name} {required.hive_type}' to the column list"
            )
        if types[required.name] != required.hive_type:
            raise SchemaError(
                f"{path}: lineage column '{required.name}' is {types[required.name]}; "
                f"declare it as '{required.name} {required.hive_type}'"
            )


def _check_key_column(path: str | Path, columns: tuple[Column, ...], key_column: str | None) -> None:
    if key_column is None:
        return
    types = {c.name: c.hive_type for c in columns}
    if key_column in {c.name for c in LINEAGE_COLUMNS}:
        raise SchemaError(f"{path}: key column '{key_column}' is a lineage column; choose another key_column")
    if key_column not in types:
        raise SchemaError(
            f"{path}: key column '{key_column}' (from [job] key_column) is not in the column list; "
            f"add '{key_column} string' (or binary) or change key_column"
        )
    if types[key_column] not in KEY_COLUMN_TYPES:
        raise SchemaError(
            f"{path}: key column '{key_column}' is {types[key_column]}; declare it as string or binary"
        )


def _check_partitions(path: str | Path, partitions: tuple[Column, ...]) -> None:
    partitioner_for(str(path), [(c.name, c.hive_type) for c in partitions])  # a SchemaError if none fits


def _check_placeholders(path: str | Path, template: str) -> None:
    unknown = sorted(set(_PLACEHOLDER_RE.findall(template)) - set(PLACEHOLDERS))
    # A placeholder that only appears in a comment does not name anything.
    found = set(_PLACEHOLDER_RE.findall(without_comments(template)))
    if unknown:
        raise SchemaError(
            f"{path}: unknown placeholder(s) {', '.join('${%s}' % u for u in unknown)}; "
            "only ${database}, ${table} and ${location} are filled in"
        )
    for name in PLACEHOLDERS:
        if name not in found:
            raise SchemaError(
                f"{path}: placeholder ${{{name}}} is missing; the ETL must choose the {name}, "
                "so write it as ${database}.${table} ... LOCATION '${location}'"
            )


def _check_placeholder_values(path: str | Path, values: dict[str, str]) -> None:
    for name in ("database", "table"):
        if not HIVE_NAME_RE.fullmatch(values[name]):
            raise SchemaError(
                f"cannot render {path}: {name} name {values[name]!r} is not a Hive name; "
                "use letters, digits and _ only"
            )
    if re.search(r"['\\\n]", values["location"]):
        raise SchemaError(
            f"cannot render {path}: location {values['location']!r} contains a quote, backslash or "
            "newline, which would break the LOCATION literal; choose a plain path"
        )
