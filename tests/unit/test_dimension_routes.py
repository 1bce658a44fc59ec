"""[dimension] sections with [route] sections, without services: each route joins or hands to its
transform the dimensions it lists; one loaded copy serves every route joining a dimension, cast
to the types those routes declare alike. On the real stack: tests/integration/test_enrichment_routes.py."""
from __future__ import annotations

import uuid
from pathlib import Path

import pyarrow as pa
import pytest

from etl.config import load_config
from etl.context.job import JobContext
from etl.errors import ConfigError
from etl.rows.dimensions import DimensionLoader
from tests.harness.enrichment import LINEAGE_SQL
from tests.harness.paths import EVENTS_SCHEMA

TRANSFORM = "etl.examples:minute_and_country"


def ddl(tmp_path: Path, name: str, columns: str) -> Path:
    path = tmp_path / f"{name}.sql"
    path.write_text(f"CREATE EXTERNAL TABLE IF NOT EXISTS ${{database}}.${{table}} ({columns}, {LINEAGE_SQL}) "
                    f"PARTITIONED BY (dt string, hour string) STORED AS PARQUET LOCATION '${{location}}'")
    return path


def tiered(tmp_path: Path, rank_type: str = "int") -> Path:
    return ddl(tmp_path, f"tiered_{rank_type}", f"event_id bigint, user_id string, user_tier string, "
                                                f"tier_rank {rank_type}")


def users_dimension(tmp_path: Path) -> str:
    source = tmp_path / "users.csv"
    source.write_text("user_id,user_tier,tier_rank\nu0,gold,1\nu1,silver,2\n")
    return f"[dimension users]\nsource = {source}\njoin_key = user_id\ncolumns = user_tier, tier_rank\n"


def routed(tmp_path: Path, routes: str, dimensions: str) -> Path:
    """A routed config (nothing here is contacted: its ports are closed)."""
    path = tmp_path / f"unit-{uuid.uuid4().hex[:6]}.ini"
    path.write_text(f"[job]\nname = unit\n[kafka]\nbootstrap.servers = 127.0.0.1:1\n[zookeeper]\nhosts = 127.0.0.1:1\n"
                    f"[warehouse]\nurl = file://{tmp_path}/wh\n[hive]\ndatabase = d\nrejected_table = rejects\n"
                    f"{dimensions}\n{routes}")
    return path


def route(name: str, schema: Path, extra: str = "") -> str:
    return f"[route {name}]\ntopics = {name}\ntable = {name}\nschema = {schema}\n{extra}\n"


def test_each_route_sees_the_dimensions_it_lists_and_a_transform_only_one_needs_no_job_transform(tmp_path):
    config = load_config(routed(tmp_path, route("plain", EVENTS_SCHEMA) +
                                route("tiered", tiered(tmp_path), "dimensions = users") +
                                route("tagged", EVENTS_SCHEMA, f"dimensions = codes\ntransform = {TRANSFORM}"),
                                users_dimension(tmp_path) + "[dimension codes]\nsource = hive:d.codes\ncolumns = c\n"))
    assert config.job.transform is None and [d.name for d in config.dimensions] == ["users", "codes"]
    views = {r.name: config.for_table(r, r.table) for r in config.routes.routes}
    assert {name: [d.name for d in view.dimensions] for name, view in views.items()} == {
        "plain": [], "tiered": ["users"], "tagged": ["codes"]}


def test_a_dimension_is_cast_to_the_types_of_the_route_that_joins_it_not_the_first_routes(tmp_path):
    """The first route's table has no tier_rank: the loader takes the joining route's DDL."""
    config = load_config(routed(tmp_path, route("plain", EVENTS_SCHEMA) +
                                route("tiered", tiered(tmp_path), "dimensions = users"), users_dimension(tmp_path)))
    context = JobContext(config)
    [users] = config.dimensions
    assert context.dimension_schema(users).column("tier_rank").hive_type == "int"
    loaded = DimensionLoader(config.dimensions, context.dimension_schema, spark=lambda: None).load_all()
    assert loaded["users"].table.schema.field("tier_rank").type == pa.int32()  # the CSV's int64, as the DDL says


def test_routes_that_join_one_dimension_declare_its_columns_with_the_same_types(tmp_path):
    config = load_config(routed(tmp_path, route("narrow", tiered(tmp_path, "int"), "dimensions = users") +
                                route("wide", tiered(tmp_path, "bigint"), "dimensions = users"),
                                users_dimension(tmp_path)))
    with pytest.raises(ConfigError) as refused:
        JobContext(config).spec
    said = str(refused.value)
    assert "[dimension users]: [route wide] declares 'tier_rank' as bigint in" in said, said
    assert "and [route narrow] as int in" in said and refused.value.exit_code == 2, said


def test_a_dimension_no_route_lists_is_refused_at_load(tmp_path):
    with pytest.raises(ConfigError, match=r"\[dimension users\]: no \[route\] lists it in dimensions"):
        load_config(routed(tmp_path, route("plain", EVENTS_SCHEMA), users_dimension(tmp_path)))
