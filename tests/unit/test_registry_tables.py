"""Routes with `schema = registry` (etl.job.registry_tables, etl.model.table_ddl): the table's DDL
derived from the subject's latest schema by `etl schema suggest`'s rule, once per command, and
evolved by the rule a DDL file's table is evolved by (etl.hive.evolution); against the Schema
Registry test server, no other service."""
from __future__ import annotations

import json

import pytest
from confluent_kafka.schema_registry import Schema

from etl.config.model import HiveFormat
from etl.config import load_config
from etl.context.job import JobContext
from etl.errors import SchemaError
from etl.hive.evolution import IncompatibleSchemaChange, plan_evolution
from etl.model.schema import LINEAGE_COLUMNS, Column
from etl.model.table_ddl import DEFAULT_PARTITIONS, FILLED_BY_ETL, NO_COLUMN_TYPE, derived_ddl, field_columns
from tests.harness.config_file import routed_ini
from tests.harness.paths import EVENTS_SCHEMA
from tests.harness.registry_payloads import AVRO_V1, AVRO_V2, registry_client

V1_COLUMNS = (Column("user_id", "bigint"), Column("country", "string"), Column("amount", "decimal(10,2)"),
              Column("ts", "timestamp"), Column("day", "date"), Column("status", "string"), Column("small", "bigint"),
              Column("payload", "binary"))


def test_fields_map_to_columns_by_the_rule_schema_suggest_prints():
    columns, unmapped = field_columns([("Id", "bigint"), ("tags", None), ("bad-name", "string"), ("ok", "string"),
                                       ("id", "string")], reserved=("ok",))
    assert columns == (Column("id", "bigint"),)  # lower-cased; a name taken already is left out
    assert unmapped == (("tags", NO_COLUMN_TYPE), ("bad-name", "not a valid Hive column name"))


def test_a_derived_table_has_the_lineage_and_key_columns_first_then_the_fields_in_order():
    ddl, left_out = derived_ddl([("b", "string"), ("kafka_offset", "bigint"), ("a", "int")], DEFAULT_PARTITIONS,
                                "msg_key", "subject s-value (schema id 1), the latest, of [route r]",
                                HiveFormat.PARQUET)
    schema = ddl.schema("msg_key")
    assert schema.columns == LINEAGE_COLUMNS + (Column("msg_key", "string"), Column("b", "string"), Column("a", "int"))
    assert schema.partition_columns == DEFAULT_PARTITIONS and left_out == (("kafka_offset", FILLED_BY_ETL),)
    rendered = ddl.render("db", "t", "file:///w/t", HiveFormat.PARQUET)
    assert "CREATE EXTERNAL TABLE IF NOT EXISTS db.t (" in rendered and "LOCATION 'file:///w/t'" in rendered


def _register(url: str, subject: str, schema: dict) -> None:
    registry_client(url).register_schema(subject, Schema(json.dumps(schema), "AVRO"))


def _config(tmp_path, url: str):
    """A DDL route partitioned by hour, and a registry route for topic clicks."""
    path = tmp_path / "etl.ini"
    path.write_text(routed_ini(f"[route events]\ntopics = events\ntable = events\nschema = {EVENTS_SCHEMA}\n\n"
                               f"[route clicks]\ntopics = clicks\ntable = clicks_{{topic}}\nschema = registry\n"
                               f"decoder = avro\n\n[schema_registry]\nurl = {url}\n"))
    return load_config(path)


def _derived(config, topic="clicks"):
    with JobContext(config) as context:
        route = config.routes.by_name("clicks")
        spec = context.spec_for(route, topic)
        assert context.spec_for(route, topic) is spec  # derived once per command
        return spec


def test_a_registry_route_s_table_is_derived_from_the_subject_s_latest_schema(tmp_path, schema_registry):
    _register(schema_registry.url, "clicks-value", AVRO_V1)
    spec = _derived(_config(tmp_path, schema_registry.url))
    assert spec.schema.columns == LINEAGE_COLUMNS + V1_COLUMNS
    assert spec.schema.partition_columns == DEFAULT_PARTITIONS and spec.route == "clicks"
    assert spec.ddl is not None and spec.ddl.source.startswith("subject clicks-value (schema id ")
    assert spec.ddl.source.endswith("of [route clicks]") and spec.ddl.source in spec.ddl.remedy
    assert [c.name for c in spec.decoder.schema.columns] == [c.name for c in spec.schema.columns]


def test_a_field_the_subject_adds_is_a_column_evolution_adds_at_the_end(tmp_path, schema_registry):
    _register(schema_registry.url, "clicks-value", AVRO_V1)
    config = _config(tmp_path, schema_registry.url)
    before = _derived(config).schema.columns
    _register(schema_registry.url, "clicks-value", AVRO_V2)
    after = _derived(config)
    evolution = plan_evolution("db.clicks_clicks", after.ddl.source, before, after.schema.columns)
    assert evolution.added == (Column("browser", "string"),)


@pytest.mark.parametrize("change, said", [
    (lambda f: {**f, "type": "string"} if f["name"] == "small" else f, "column 'small' of Hive table db.clicks_clicks "
                                                                      "is bigint, but subject clicks-value"),
    (lambda f: None if f["name"] == "small" else f, "has column 'small bigint', which subject clicks-value"),
])
def test_a_change_evolution_refuses_is_refused_naming_the_subject_and_the_route(tmp_path, schema_registry,
                                                                                 change, said):
    _register(schema_registry.url, "clicks-value", AVRO_V1)
    config = _config(tmp_path, schema_registry.url)
    before = _derived(config).schema.columns
    fields = [changed for changed in (change(f) for f in AVRO_V1["fields"]) if changed is not None]
    _register(schema_registry.url, "clicks-value", {**AVRO_V1, "fields": fields})
    after = _derived(config)
    with pytest.raises(IncompatibleSchemaChange) as refused:
        plan_evolution("db.clicks_clicks", after.ddl.source, before, after.schema.columns)
    assert said in str(refused.value) and "of [route clicks]" in str(refused.value)
    assert refused.value.exit_code == 2


def test_a_topic_whose_subject_the_registry_lacks_is_refused_naming_it_and_the_route(tmp_path, schema_registry):
    with pytest.raises(SchemaError, match=r"\[route clicks\] schema = registry: the Schema Registry has no subject "
                                          r"clicks-value, which topic clicks's table is derived from"):
        _derived(_config(tmp_path, schema_registry.url))


def test_the_job_s_partitions_are_the_ddl_routes_or_the_default(tmp_path, schema_registry):
    _register(schema_registry.url, "clicks-value", AVRO_V1)
    with JobContext(_config(tmp_path, schema_registry.url)) as context:
        assert context.spec.route == "events"  # the first route with a DDL file
        assert context.spec.ddl is not None and context.spec.ddl.source == str(EVENTS_SCHEMA)
