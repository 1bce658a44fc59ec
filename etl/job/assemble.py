"""The writer spec: what the tasks need to write, built and checked once, at start-up, by the
command's context (etl.context.job), which also assembles the Job from it."""
from __future__ import annotations

from dataclasses import replace

import pyarrow as pa

from etl.config import Config, DimensionConfig
from etl.job.partition_writer import WriterSpec
from etl.errors import ConfigError
from etl.config.rollups import rollup_route
from etl.config.routes import RouteConfig
from etl.model.rollup_columns import rollup_column_problem
from etl.model.rollup_table import RollupSpec
from etl.model.schema import Column, TableSchema, arrow_schema
from etl.model.table_ddl import TableDdl, ddl_file
from etl.rows.decoders import Decoder, make_decoder
from etl.rows.decoders.writer_schemas import WriterSchemas
from etl.rows.dimensions import DimensionLoader
from etl.rows.enrichment import check_against_schema, enriched_columns
from etl.rows.headers import check_header_columns
from etl.rows.rollup_filter_eval import rows_kept
from etl.rows.transform import load_transform
from etl.sink.layout import FileLayout


def writer_spec(config: Config, writer_schemas: WriterSchemas | None = None, ddl: TableDdl | None = None) -> WriterSpec:
    """Everything the tasks need to write, checked at start-up: the DDL (`ddl`, or else [hive]
    schema's file), the decoder, the dimensions against the DDL (and file sources' columns), the
    transform importable. `writer_schemas`: the Schema Registry's, which the command's context
    builds (etl.context.job.JobContext.writer_schemas); None without [schema_registry]."""
    ddl = ddl_file(config.hive.the_schema_file) if ddl is None else ddl
    schema = ddl.schema(config.job.key_column)
    check_against_schema(config.dimensions, schema, config.path, ddl.source)
    _check_event_column(config, schema, ddl.source)
    _check_layout_columns(config, schema, ddl.source)
    ddl.check_stored_as(config.hive.format, f"{config.path}: [hive] format")
    headers = config.job.header_columns
    check_header_columns(headers, schema, enriched_columns(config.dimensions), config.path, ddl.source)
    loader = DimensionLoader(config.dimensions, lambda _dimension: schema, spark=lambda: None)
    for dimension in config.dimensions:
        loader.check_source(dimension)
    if config.job.transform:
        load_transform(config.job.transform)
    # Enriched and header columns are filled after decoding: the decoder neither reads nor checks them.
    filled_later = enriched_columns(config.dimensions) + tuple(entry.column for entry in headers)
    decoder = make_decoder(config.job.decoder, schema.without_columns(filled_later),
                           zone=config.hive.partitioning.timezone, writer_schemas=writer_schemas,
                           avro_schema=config.job.avro_schema.text if config.job.avro_schema else None)
    return WriterSpec(schema=schema, decoder=decoder, key_column=config.job.key_column,
                      row_group_size=config.job.row_group_size, layout=FileLayout.of(config),
                      dimensions=config.dimensions, transform=config.job.transform, header_columns=headers, ddl=ddl)


def route_specs(config: Config, writer_schemas: WriterSchemas | None = None) -> dict[str, WriterSpec]:
    """Each route's writer spec (route name -> spec; one for a one-table job), all checked at
    start-up, with every route's DDL partitioned alike: a batch has one Hive partition, or one
    Placement, for all its tables. A route with `schema = registry` has a spec per topic
    (etl.job.registry_tables), partitioned as these are."""
    files = [route for route in config.routes.routes if not route.from_registry]
    specs = {route.name: replace(writer_spec(config.for_table(route, route.table), writer_schemas), route=route.name)
             for route in files}
    for first, route in ((files[0], route) for route in files[1:]):
        ours, theirs = specs[route.name].schema.partition_columns, specs[first.name].schema.partition_columns
        if ours != theirs:
            raise ConfigError(f"{config.path}: {route.describe()} schema {route.schema_file} is partitioned by "
                              f"{_names(ours)}, and {first.describe()}'s {first.schema_file} by {_names(theirs)}; "
                              f"every table of a job is partitioned alike")
    _check_dimension_types(config, specs)
    _check_rollups(config, specs)
    tables = {route.name: route.table for route in files}
    return {name: replace(spec, rollups=tuple(RollupSpec.of(rollup, tables[name], spec.schema)
                                              for rollup in config.rollups if rollup.route == name))
            for name, spec in specs.items()}


def _check_rollups(config: Config, specs: dict[str, WriterSpec]) -> None:
    """Each rollup's columns exist in its table, with types its terms take, and each literal of its
    filter can be compared with its column (tried on no rows, as the tasks will on theirs)."""
    for rollup in config.rollups:
        spec = specs[rollup.route]
        found = rollup_column_problem(rollup, spec.schema)
        if found is None and rollup.where is not None:
            try:
                rows_kept(arrow_schema(spec.schema).empty_table(), rollup.where)
            except (ValueError, pa.ArrowException) as exc:
                found = ("where", str(exc))
        if found is not None:
            key, why = found
            raise ConfigError(f"{config.path}: {rollup.describe()} {key}: {why} "
                              f"({rollup_route(rollup, config.routes).schema_file})")


def dimension_schema(config: Config, specs: dict[str, WriterSpec], dimension: DimensionConfig) -> TableSchema:
    """The DDL a joined dimension's key and columns are cast to when it is loaded: the first
    route's that joins it (`route_specs` checks that every such route types them alike)."""
    return specs[_joining(config, dimension)[0].name].schema


def _joining(config: Config, dimension: DimensionConfig) -> list[RouteConfig]:
    """The routes that join `dimension` (routes with DDL files: etl.config.routes refuses it in a registry route)."""
    return [route for route in config.routes.routes if dimension.name in route.dimensions and not route.from_registry]


def _check_dimension_types(config: Config, specs: dict[str, WriterSpec]) -> None:
    """One loaded copy of a dimension serves every route that joins it, so they declare its key
    (their join_key column) and its columns with the same Hive types."""
    for dimension in config.dimensions:
        if dimension.join_key is None:
            continue  # only handed to transforms: it fills no column
        first, *others = _joining(config, dimension)
        columns = (dimension.join_key, *dimension.columns)
        for route, column in ((route, column) for route in others for column in columns):
            ours, theirs = specs[route.name].schema.column(column), specs[first.name].schema.column(column)
            if ours.hive_type != theirs.hive_type:
                raise ConfigError(f"{config.path}: [dimension {dimension.name}]: {route.describe()} declares "
                                  f"{column!r} as {ours.hive_type} in {route.schema_file}, and {first.describe()} as "
                                  f"{theirs.hive_type} in {first.schema_file}; the routes that join a dimension "
                                  f"declare its key and columns with the same types")


def probe_decoder(config: Config, route: RouteConfig, field: str, spec: WriterSpec,
                  writer_schemas: WriterSchemas | None = None) -> Decoder:
    """The decoder that reads a split topic's one field, before its route is known: the route's
    decoder over that field alone, typed as the route's table types it (text if it has no such
    column), its value then compared as text (etl.rows.routing)."""
    hive_type = next((c.hive_type for c in spec.schema.data_columns if c.name == field), "string")
    return make_decoder(route.decoder, TableSchema((Column(field, hive_type),), ()),
                        zone=config.hive.partitioning.timezone, writer_schemas=writer_schemas,
                        avro_schema=route.avro_schema.text if route.avro_schema else None)


def _names(columns) -> str:
    return "(" + ", ".join(c.name for c in columns) + ")"


def _check_event_column(config: Config, schema: TableSchema, source: str) -> None:
    column = config.hive.partitioning.column
    if column is None:
        return
    found = {c.name: c.hive_type for c in schema.data_columns}
    if found.get(column) != "timestamp":
        what = f"is {found[column]}" if column in found else "is not a column of the table"
        raise ConfigError(f"{config.path}: [hive] partition_by: column:{column} {what} ({source}); "
                          f"it must name a timestamp column of the table")


def _check_layout_columns(config: Config, schema: TableSchema, source: str) -> None:
    """[hive] bloom_filter_columns and sort_by name columns of the files (the partition columns
    live in folder names), of a type a bloom filter or a sort takes."""
    types = {c.name: c.hive_type for c in schema.columns}
    nested = ("array", "map", "struct")
    for key, names, refused, what in (("bloom_filter_columns", config.hive.bloom_filter_columns, nested + ("boolean",),
                                       "a bloom filter"),
                                      ("sort_by", config.hive.sort_by, nested, "a sort")):
        for name in names:
            kind = types.get(name.lower())
            if kind is None:
                raise ConfigError(f"{config.path}: [hive] {key}: {name} is not a column of the table's files "
                                  f"({source})")
            if kind.startswith(refused):
                raise ConfigError(f"{config.path}: [hive] {key}: {name} is {kind}, which takes no {what} ({source})")
