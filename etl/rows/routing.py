"""Splitting one range's records among the tables of the routes that share its topic, by the value
of one field (etl.model.routes.TopicSplit), a whole chunk at a time.

The field is read by a probe: the topic's decoder over one column, the field alone, so that a
record is routed before any route's own decoder and transform see it. The value is compared as
text, as the config lists it: a number 7 is the value "7", true is "true". A JSON field read as
text (declared string, or no column of the route's table) that holds a number or a boolean is
its text as the message writes it, so `1.0` is not `1` (a field declared double reads both as
the number 1, text "1"). A record the probe cannot read, one without the field when no route
takes the rest, and one whose value no route lists, go to the rejected table with the reason.
Nothing else is decided here: each route's pipeline then decodes its share as a one-table job
decodes a chunk.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from etl.model.routes import TopicSplit
from etl.rows.decoders.base import Decoder
from etl.rows.decoders.json import JsonDecoder
from etl.rows.decoders.json_values import scalar_text

NO_TABLE = -1


@dataclass(frozen=True)
class Routed:
    """Each table's records (indices into the chunk, ascending), and the records no table takes."""

    by_table: dict[str, pa.Int64Array]
    rejected: list[tuple[int, str]]  # (index into the chunk, reason), ascending


class FieldRouter:
    def __init__(self, split: TopicSplit, probe: Decoder):
        if [c.name for c in probe.schema.data_columns] != [split.field]:
            raise ValueError(f"the probe decodes {probe.schema.data_columns}, not the one field {split.field!r}")
        self.split, self.probe = split, probe
        self._values = pa.array(list(split.tables), pa.string())
        self._tables = sorted(set(split.tables.values()) | ({split.rest} if split.rest else set()))
        table_index = {table: i for i, table in enumerate(self._tables)}
        self._value_table = np.array([table_index[t] for t in split.tables.values()] + [NO_TABLE], dtype=np.int64)
        self._rest = table_index[split.rest] if split.rest else NO_TABLE
        self._scalars_as_text = isinstance(probe, JsonDecoder) and pa.types.is_string(probe.output_schema.field(0).type)

    def route(self, values: Sequence[bytes | None]) -> Routed:
        good, text, errors = self._read(values)
        listed = pc.fill_null(pc.index_in(text, value_set=self._values),
                              len(self._values)).to_numpy(zero_copy_only=False)
        tables = self._value_table[listed]
        missing = pc.is_null(text).to_numpy(zero_copy_only=False)
        tables[(tables == NO_TABLE) | missing] = self._rest
        by_table = {table: pa.array(good[tables == i], pa.int64()) for i, table in enumerate(self._tables)}
        refused = [(int(index), self._why(value)) for index, value, table in
                   zip(good, text.to_pylist(), tables) if table == NO_TABLE] if (tables == NO_TABLE).any() else []
        return Routed({t: rows for t, rows in by_table.items() if len(rows)}, sorted(errors + refused))

    def _read(self, values: Sequence[bytes | None]) -> tuple[np.ndarray, pa.Array, list[tuple[int, str]]]:
        """The probe's good records (ascending), their field's text, and its errors. A JSON
        number or boolean where the probe reads text, which the probe refuses, is its text."""
        probed = self.probe.decode(values)
        field_values = probed.table.column(0).combine_chunks()
        text = field_values if pa.types.is_string(field_values.type) else pc.cast(field_values, pa.string())
        good = probed.good.to_numpy(zero_copy_only=False)
        if not (self._scalars_as_text and probed.errors):
            return good, text, probed.errors
        read = {index: scalar_text(values[index], self.split.field) for index, _ in probed.errors}
        rescued = {index: value for index, value in read.items() if value is not None}
        if not rescued:
            return good, text, probed.errors
        indices = np.concatenate([good, np.fromiter(rescued, np.int64, len(rescued))])
        order = np.argsort(indices, kind="stable")
        texts = pa.concat_arrays([text, pa.array(list(rescued.values()), pa.string())])
        return indices[order], texts.take(pa.array(order)), [e for e in probed.errors if e[0] not in rescued]

    def _why(self, value: str | None) -> str:
        listed = ", ".join(self.split.tables)
        if value is None:
            return f"{self.split.field} is missing, and no route takes the rest (values = *)"
        return f"no route takes {self.split.field} = {value!r} (routes take: {listed})"
