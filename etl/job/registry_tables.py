"""The tables of routes with `schema = registry`: each derived from the latest schema of its
topic's value subject (`<topic>-value`, the subject the decoder and `etl schema suggest` read),
by the rule `etl schema suggest` prints (etl.model.table_ddl), once per command.

The derived DDL enters where a DDL file's does, in the table's writer spec (WriterSpec.ddl):
the decoder reads the table's columns from it, and the registrar creates the table from it or
evolves the table to it as it evolves a table whose DDL file changed (etl.hive.evolution). So a
field added to the subject is a column added at the end of the table, which older rows read as
NULL; a change evolution refuses (a field dropped, retyped, or put before existing ones) is
refused at the next run, naming the subject and the route, before anything is touched.
"""
from __future__ import annotations

import logging
from dataclasses import replace

from etl.config import Config
from etl.config.routes import RouteConfig
from etl.errors import SchemaError
from etl.job.assemble import writer_spec
from etl.job.partition_writer import WriterSpec
from etl.model.schema import Column, TableSchema
from etl.model.table_ddl import derived_ddl
from etl.rows.decoders import make_decoder
from etl.rows.decoders.avro import AvroDecoder
from etl.rows.decoders.protobuf import ProtobufDecoder
from etl.rows.decoders.startup import current_writer_schemas, value_subject
from etl.rows.decoders.writer_schemas import WriterSchemas

log = logging.getLogger(__name__)


def registry_spec(config: Config, route: RouteConfig, topic: str, writer_schemas: WriterSchemas | None,
                  partitions: tuple[Column, ...]) -> WriterSpec:
    """The writer spec of `route`'s table for `topic`, its DDL derived from the subject's latest
    schema and partitioned by `partitions` (the job's other tables'). SchemaError (exit 2,
    nothing touched) when the registry has no schema for the subject, or one of another kind."""
    view = config.for_table(route, route.table_for(topic))
    # a decoder over no column: what it is asked here is the writer schema's fields, not rows
    reader = make_decoder(route.decoder, TableSchema((), partitions), zone=config.hive.partitioning.timezone,
                          writer_schemas=writer_schemas)
    assert isinstance(reader, (AvroDecoder, ProtobufDecoder))  # so etl.config.routes checked
    found = current_writer_schemas(reader, (topic,))
    where = f"{config.path}: {route.describe()} schema = registry"
    if not found:
        raise SchemaError(f"{where}: the Schema Registry has no subject {value_subject(topic)}, which topic {topic}'s "
                          f"table is derived from; its producers register it as they first write (or name a DDL "
                          f"file). Nothing was touched")
    [(subject, writer)] = found
    if writer.schema_type != route.decoder.value.upper():
        raise SchemaError(f"{where}: {subject} is a {writer.schema_type} schema, and the route reads "
                          f"decoder = {route.decoder}; set the route's decoder to match")
    ddl, left_out = derived_ddl(reader.fields_of(writer), partitions, config.job.key_column,
                                f"{subject}, the latest, of {route.describe()}", config.hive.format)
    for field, why in left_out:
        log.warning("%s: field %s of %s has no column: %s", where, field, subject, why)
    return replace(writer_spec(view, writer_schemas, ddl), route=route.name)
