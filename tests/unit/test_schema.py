"""DDL templates -> TableSchema -> Arrow schema, and rendering the DDL for Hive."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from etl.config.model import HiveFormat
from etl.errors import SchemaError
from etl.hive.evolution import plan_evolution
from etl.hive.registrar import REJECTED_DDL
from etl.model.table_ddl import ddl_file
from etl.model.schema import (
    Column,
    TableSchema,
    arrow_schema,
    arrow_type,
    data_arrow_schema,
    load_table_schema,
    rejected_arrow_schema,
)

SCHEMAS = Path(__file__).resolve().parents[2] / "warehouse_schema"
LINEAGE_SQL = "kafka_topic string, kafka_partition int, kafka_offset bigint, kafka_timestamp timestamp"
LINEAGE_ARROW = [
    ("kafka_topic", pa.string()),
    ("kafka_partition", pa.int32()),
    ("kafka_offset", pa.int64()),
    ("kafka_timestamp", pa.timestamp("ms")),
]


def write_ddl(tmp_path: Path, columns: str, partitions: str = "dt string, hour string", name="t.sql") -> Path:
    path = tmp_path / name
    path.write_text(
        "-- a test table\n"
        "CREATE EXTERNAL TABLE IF NOT EXISTS ${database}.${table} (\n"
        f"{columns}\n"
        ")\n"
        f"PARTITIONED BY ({partitions})\n"
        "STORED AS PARQUET\n"
        "LOCATION '${location}'\n"
    )
    return path


def test_events_template_gives_the_data_and_lineage_columns_in_ddl_order():
    schema = load_table_schema(SCHEMAS / "events.sql")
    assert arrow_schema(schema) == pa.schema(
        [
            ("event_id", pa.int64()),
            ("user_id", pa.string()),
            ("action", pa.string()),
            ("amount", pa.float64()),
            ("ts", pa.timestamp("ms")),
            ("ok", pa.bool_()),
            *LINEAGE_ARROW,
        ]
    )
    assert [c.name for c in schema.data_columns] == ["event_id", "user_id", "action", "amount", "ts", "ok"]
    assert schema.partition_columns == (Column("dt", "string"), Column("hour", "string"))


def test_access_log_template():
    schema = load_table_schema(SCHEMAS / "access_log.sql")
    assert data_arrow_schema(schema) == pa.schema(
        [("log_time", pa.timestamp("ms")), ("level", pa.string()), ("message", pa.string())]
    )


def test_rejected_template_matches_the_rejected_arrow_schema():
    schema = load_table_schema(REJECTED_DDL)
    assert arrow_schema(schema) == rejected_arrow_schema()
    assert rejected_arrow_schema().names == [
        "kafka_topic", "kafka_partition", "kafka_offset", "kafka_timestamp", "kafka_key", "raw_value", "error",
        "kafka_timestamp_ms",
    ]
    assert rejected_arrow_schema().field("kafka_timestamp_ms").type == pa.int64()


def test_a_rejected_table_of_an_earlier_version_evolves_by_adding_kafka_timestamp_ms():
    # Existing <table>_rejected tables were created without kafka_timestamp_ms: the registrar's
    # schema evolution (which runs on the rejected table too) must be able to add it at the end.
    earlier = tuple(c for c in load_table_schema(REJECTED_DDL).columns if c.name != "kafka_timestamp_ms")
    evolution = plan_evolution("db.t_rejected", str(REJECTED_DDL), earlier, load_table_schema(REJECTED_DDL).columns)
    assert evolution.added == (Column("kafka_timestamp_ms", "bigint"),)


def test_decimal_comments_and_quoted_text_do_not_confuse_the_parser(tmp_path):
    path = write_ddl(
        tmp_path,
        "  -- money, in cents (not really)\n"
        "  price decimal(10,2) COMMENT 'price, in EUR (gross) -- not net',\n"
        "  `Code` VARCHAR(20),  -- trailing comment, with a comma\n"
        "  flag CHAR(1) COMMENT \"it's a flag\",\n"
        "  big DECIMAL( 38 , 0 ),\n"
        "  plain decimal,\n"
        "  tiny TINYINT, small smallint, n integer, f float, d date, b binary,\n"
        f"  {LINEAGE_SQL}",
    )
    schema = load_table_schema(path)
    assert [(c.name, c.hive_type) for c in schema.data_columns] == [
        ("price", "decimal(10,2)"),
        ("Code", "string"),
        ("flag", "string"),
        ("big", "decimal(38,0)"),
        ("plain", "decimal(10,0)"),
        ("tiny", "tinyint"),
        ("small", "smallint"),
        ("n", "int"),
        ("f", "float"),
        ("d", "date"),
        ("b", "binary"),
    ]
    assert data_arrow_schema(schema).types[:5] == [
        pa.decimal128(10, 2), pa.string(), pa.string(), pa.decimal128(38, 0), pa.decimal128(10, 0)
    ]


@pytest.mark.parametrize(
    "hive_type, expected",
    [
        ("string", pa.string()),
        ("boolean", pa.bool_()),
        ("tinyint", pa.int8()),
        ("smallint", pa.int16()),
        ("int", pa.int32()),
        ("bigint", pa.int64()),
        ("float", pa.float32()),
        ("double", pa.float64()),
        ("decimal(12,4)", pa.decimal128(12, 4)),
        ("date", pa.date32()),
        ("timestamp", pa.timestamp("ms")),
        ("binary", pa.binary()),
    ],
)
def test_hive_to_arrow_types(hive_type, expected):
    assert arrow_type(hive_type) == expected


def test_partition_columns_are_not_in_the_file_schema():
    schema = load_table_schema(SCHEMAS / "events.sql")
    assert "dt" not in arrow_schema(schema).names and "hour" not in arrow_schema(schema).names


def test_missing_lineage_column_is_named(tmp_path):
    path = write_ddl(tmp_path, "a string, kafka_topic string, kafka_partition int, kafka_timestamp timestamp")
    with pytest.raises(SchemaError, match=r"kafka_offset.*missing.*add 'kafka_offset bigint'") as error:
        load_table_schema(path)
    assert str(path) in str(error.value)


def test_lineage_column_with_wrong_type(tmp_path):
    path = write_ddl(tmp_path, "a string, kafka_topic string, kafka_partition bigint, "
                               "kafka_offset bigint, kafka_timestamp timestamp")
    with pytest.raises(SchemaError, match=r"'kafka_partition' is bigint; declare it as 'kafka_partition int'"):
        load_table_schema(path)


@pytest.mark.parametrize("partitions", ["dt string, hour int", "day string, hour string",
                                        "dt string, hour string, minute string", "hour string"])
def test_partition_columns_must_be_dt_and_hour_strings(tmp_path, partitions):
    path = write_ddl(tmp_path, f"a string, {LINEAGE_SQL}", partitions)
    with pytest.raises(SchemaError, match=r"PARTITIONED BY .*use 'PARTITIONED BY \(dt string, hour string\)'"):
        load_table_schema(path)


@pytest.mark.parametrize("partitions, granularity", [("dt string", "day"), ("dt string, hour string", "hour")])
def test_partition_columns_set_the_granularity(tmp_path, partitions, granularity):
    path = write_ddl(tmp_path, f"a string, {LINEAGE_SQL}", partitions)
    assert load_table_schema(path).partitioner.granularity == granularity


def test_missing_partitioned_by(tmp_path):
    path = tmp_path / "t.sql"
    path.write_text(f"CREATE TABLE ${{database}}.${{table}} (a string, {LINEAGE_SQL}) STORED AS PARQUET")
    with pytest.raises(SchemaError, match="PARTITIONED BY is missing"):
        load_table_schema(path)


@pytest.mark.parametrize("bad_type", ["array<string>", "map<string,int>", "struct<a:int,b:int>", "interval",
                                      "decimal(39,2)", "decimal(5,6)"])
def test_unsupported_types_are_refused_with_the_column_named(tmp_path, bad_type):
    path = write_ddl(tmp_path, f"a string, weird {bad_type}, {LINEAGE_SQL}")
    with pytest.raises(SchemaError, match="column 'weird'"):
        load_table_schema(path)


def test_duplicate_names_differing_in_case(tmp_path):
    path = write_ddl(tmp_path, f"UserId string, userid bigint, {LINEAGE_SQL}")
    with pytest.raises(SchemaError, match=r"'userid' is defined twice .*'UserId'"):
        load_table_schema(path)


def test_partition_column_repeated_among_the_columns(tmp_path):
    path = write_ddl(tmp_path, f"dt string, {LINEAGE_SQL}")
    with pytest.raises(SchemaError, match="'dt' is defined twice"):
        load_table_schema(path)


def test_unreadable_column_definition(tmp_path):
    path = write_ddl(tmp_path, f"a string, b, {LINEAGE_SQL}")
    with pytest.raises(SchemaError, match="cannot read column definition 'b'"):
        load_table_schema(path)


def test_unclosed_column_list(tmp_path):
    path = tmp_path / "t.sql"
    path.write_text("CREATE TABLE ${database}.${table} (a decimal(10,2)")
    with pytest.raises(SchemaError, match="never closed"):
        load_table_schema(path)


def test_missing_file():
    with pytest.raises(SchemaError, match="cannot read schema file"):
        load_table_schema("/nonexistent/x.sql")


def test_key_column_is_not_a_data_column(tmp_path):
    path = write_ddl(tmp_path, f"a string, msg_key string, {LINEAGE_SQL}")
    schema = load_table_schema(path, key_column="msg_key")
    assert schema.key_column == "msg_key"
    assert [c.name for c in schema.data_columns] == ["a"]
    assert arrow_schema(schema).names[:2] == ["a", "msg_key"]
    assert [c.name for c in load_table_schema(path).data_columns] == ["a", "msg_key"]


def test_binary_key_column(tmp_path):
    path = write_ddl(tmp_path, f"a string, k binary, {LINEAGE_SQL}")
    assert load_table_schema(path, key_column="k").column("k").hive_type == "binary"


def test_key_column_must_exist(tmp_path):
    path = write_ddl(tmp_path, f"a string, {LINEAGE_SQL}")
    with pytest.raises(SchemaError, match=r"key column 'k' .* not in the column list; add 'k string'"):
        load_table_schema(path, key_column="k")


def test_key_column_must_be_string_or_binary(tmp_path):
    path = write_ddl(tmp_path, f"a string, k bigint, {LINEAGE_SQL}")
    with pytest.raises(SchemaError, match="key column 'k' is bigint; declare it as string or binary"):
        load_table_schema(path, key_column="k")


def test_table_schema_is_frozen_and_hashable():
    schema = load_table_schema(SCHEMAS / "events.sql")
    assert isinstance(schema, TableSchema)
    assert hash(schema) == hash(load_table_schema(SCHEMAS / "events.sql"))
    with pytest.raises(AttributeError):
        schema.key_column = "x"


def test_render_ddl_fills_the_placeholders():
    ddl = ddl_file(SCHEMAS / "events.sql").render("analytics", "events", "file:///warehouse/analytics.db/events",
                                                  PARQUET)
    assert "CREATE EXTERNAL TABLE IF NOT EXISTS analytics.events (" in ddl
    assert "LOCATION 'file:///warehouse/analytics.db/events'" in ddl
    assert "${" not in ddl


PARQUET, ORC = HiveFormat.PARQUET, HiveFormat.ORC


def test_a_ddl_naming_no_format_is_stored_as_the_job_s_and_one_naming_another_is_refused(tmp_path):
    """Without a clause Hive makes a text table, which no file the job writes is: the table's
    format ([hive] format) is said for it. A clause naming another format is refused at start-up
    (etl.job.assemble); a COMMENT or a comment saying STORED AS is no clause."""
    plain = tmp_path / "plain.sql"
    plain.write_text("-- STORED AS TEXTFILE, once\nCREATE TABLE ${database}.${table} (a string COMMENT 'stored "
                     "as text') PARTITIONED BY (dt string)\nLOCATION '${location}'")
    for file_format in HiveFormat:
        rendered = ddl_file(plain).render("db", "t", "/x", file_format)
        assert f"PARTITIONED BY (dt string)\nSTORED AS {file_format.value.upper()}\nLOCATION '/x'" in rendered
        ddl_file(plain).check_stored_as(file_format, "[hive] format")
    said = tmp_path / "said.sql"
    said.write_text(plain.read_text().replace("\nLOCATION", "\nSTORED AS PARQUET\nLOCATION"))
    ddl_file(said).check_stored_as(PARQUET, "[hive] format")
    assert "\nSTORED AS PARQUET\nLOCATION" in ddl_file(said).render("db", "t", "/x", ORC)  # its own: checked apart
    with pytest.raises(SchemaError, match=r"said.sql says STORED AS PARQUET, but \[hive\] format = orc: the job "
                                          r"writes its files as ORC. Make the DDL say STORED AS ORC"):
        ddl_file(said).check_stored_as(ORC, "[hive] format")
    for shipped in SCHEMAS.glob("*.sql"):  # the shipped DDLs serve either format
        for file_format in HiveFormat:
            ddl_file(shipped).check_stored_as(file_format, "[hive] format")
    twice = tmp_path / "twice.sql"
    twice.write_text("CREATE TABLE ${database}.${table} (a string) STORED AS ORC STORED AS PARQUET "
                     "LOCATION '${location}'")
    with pytest.raises(SchemaError, match="has 2 STORED AS clauses"):
        ddl_file(twice).check_stored_as(ORC, "[hive] format")


def test_render_ddl_of_the_rejected_table():
    ddl = ddl_file(REJECTED_DDL).render("analytics", "events_rejected", "/w/events_rejected", PARQUET)
    assert "analytics.events_rejected (" in ddl


def test_render_ddl_refuses_a_missing_placeholder(tmp_path):
    path = tmp_path / "t.sql"
    path.write_text("-- LOCATION '${location}'\nCREATE TABLE ${database}.${table} (a string)")
    with pytest.raises(SchemaError, match=r"placeholder \$\{location\} is missing"):
        ddl_file(path).render("db", "t", "/x", PARQUET)


def test_render_ddl_refuses_unknown_placeholders(tmp_path):
    path = tmp_path / "t.sql"
    path.write_text("CREATE TABLE ${database}.${table} (a string) LOCATION '${location}' "
                    "TBLPROPERTIES ('x'='${owner}')")
    with pytest.raises(SchemaError, match=r"unknown placeholder\(s\) \$\{owner\}"):
        ddl_file(path).render("db", "t", "/x", PARQUET)


@pytest.mark.parametrize("database, table, location", [
    ("my-db", "t", "/x"), ("db", "t;drop", "/x"), ("db", "t", "/x'y"), ("db", "t", "/x\\y"),
])
def test_render_ddl_refuses_values_that_would_break_the_statement(database, table, location):
    with pytest.raises(SchemaError, match="cannot render"):
        ddl_file(SCHEMAS / "events.sql").render(database, table, location, PARQUET)
