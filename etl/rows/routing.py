"""Splitting one range's records among the tables of the routes that share its topic, by the value
of one field (etl.model.routes.TopicSplit), a whole chunk at a time.

The field is read by a probe: the topic's decoder over one column, the field alone, so that a
record is routed before any route's own decoder and transform see it. The value is compared as
text, as the config lists it: a number 7 is the value "7", true is "true". A record the probe
cannot read, one without the field when no route takes the rest, and one whose value no route
lists, go to the rejected table with the reason. Nothing else is decided here: each route's
pipeline then decodes its share as a one-table job decodes a chunk.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from etl.model.routes import TopicSplit
from etl.rows.decoders.base import Decoder

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

    def route(self, values: Sequence[bytes | None]) -> Routed:
        probed = self.probe.decode(values)
        field_values = probed.table.column(0)
        text = field_values if pa.types.is_string(field_values.type) else pc.cast(field_values, pa.string())
        listed = pc.fill_null(pc.index_in(text, value_set=self._values), len(self._values)).to_numpy(zero_copy_only=False)
        tables = self._value_table[listed]
        missing = pc.is_null(text).to_numpy(zero_copy_only=False)
        tables[(tables == NO_TABLE) | missing] = self._rest
        good = probed.good.to_numpy(zero_copy_only=False)
        by_table = {table: pa.array(good[tables == i], pa.int64()) for i, table in enumerate(self._tables)}
        refused = [(int(index), self._why(value)) for index, value, table in
                   zip(good, text.to_pylist(), tables) if table == NO_TABLE] if (tables == NO_TABLE).any() else []
        return Routed({t: rows for t, rows in by_table.items() if len(rows)}, sorted(probed.errors + refused))

    def _why(self, value: str | None) -> str:
        listed = ", ".join(self.split.tables)
        if value is None:
            return f"{self.split.field} is missing, and no route takes the rest (values = *)"
        return f"no route takes {self.split.field} = {value!r} (routes take: {listed})"
