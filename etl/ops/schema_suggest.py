"""`etl schema suggest`: the DDL columns that the writer schemas producers use now have and the
table lacks, ready to paste at the end of the column list in warehouse_schema/, where schema
evolution adds them to the table at the next run (etl.hive.evolution).

The writer schema of a topic is the latest version of its value subject (`<topic>-value`), or
the fixed [job] avro_schema. Fields with no column type here (nested records, arrays, maps)
are listed as comments, so that nothing is left out unseen. The mapping is the one a route
with `schema = registry` derives its table by (etl.model.table_ddl.field_columns).
"""
from __future__ import annotations

from dataclasses import dataclass

from etl.config import Config
from etl.context.job import JobContext
from etl.errors import ConfigError
from etl.model.table_ddl import field_columns
from etl.rows.decoders.startup import current_writer_schemas


@dataclass(frozen=True)
class Suggestion:
    source: str  # the subject and schema id, or avro_schema
    columns: tuple[tuple[str, str], ...]  # (name, Hive type) the table lacks
    unmapped: tuple[tuple[str, str], ...]  # (field, why) of fields no column type holds

    def render(self) -> str:
        lines = [f"-- {self.source}"]
        if not self.columns and not self.unmapped:
            lines.append("-- the table has a column for every field")
        lines += [f"  , {name} {hive_type}" for name, hive_type in self.columns]
        lines += [f"  -- {field}: {why}" for field, why in self.unmapped]
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {"source": self.source, "columns": [{"name": n, "type": t} for n, t in self.columns],
                "unmapped": [{"field": f, "why": w} for f, w in self.unmapped]}


def suggest(config: Config) -> list[Suggestion]:
    if not config.job.decoder.reads_writer_schemas:
        raise ConfigError(f"{config.path}: [job] decoder: etl schema suggest reads writer schemas; decoder = "
                          f"{config.job.decoder} has none (set decoder = avro or protobuf)")
    with JobContext(config) as context:
        spec = context.spec
        topics = context.kafka.job_topics().loaded
    have = {column.name for column in spec.schema.columns}
    suggestions = []
    for source, writer in current_writer_schemas(spec.decoder, topics):
        columns, unmapped = field_columns(spec.decoder.fields_of(writer), reserved=have)
        suggestions.append(Suggestion(source, tuple((c.name, c.hive_type) for c in columns), unmapped))
    return suggestions


def render(suggestions: list[Suggestion], config: Config) -> str:
    if not suggestions:
        return "-- the Schema Registry has no value subject for the job's topics yet"
    head = (f"-- columns to add at the end of the column list in {config.hive.the_schema_file}; the next run adds "
            f"them to the table (schema evolution)")
    return "\n".join([head, *(s.render() for s in suggestions)])
