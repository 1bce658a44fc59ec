"""RawChunk -> rows: one Kafka partition's records as the rows to keep and the rows to reject.

Each chunk is decoded, given its lineage (topic, partition, offset, timestamp), key and
header columns (etl.rows.headers), enriched from the batch's dimensions (etl.rows.enrichment)
and passed through the job's transform (etl.rows.transform), all vectorised; rows the
transform rejects go to the rejected rows with their raw message. So do records whose values
Hive or Spark could not read back (etl.rows.hive_values): a Kafka timestamp beyond year 9999,
checked before decoding is used, and, last, any out-of-range value in any column, wherever it
came from (decoder, dimension, transform). One such row would make every query of the table
fail. Nothing is written here.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping

import pyarrow as pa
import pyarrow.compute as pc

from etl.config import DimensionConfig, HeaderColumn
from etl.errors import EtlError, KafkaReadError
from etl.model.partitioning import Placement
from etl.model.schema import LINEAGE_COLUMNS, TableSchema, arrow_schema, rejected_arrow_schema
from etl.rows.decoders import Decoded, Decoder, invalid_utf8_positions, mask_without
from etl.rows.enrichment import enrich
from etl.rows.headers import header_values, invalid_header_rows
from etl.rows.hive_values import HIVE_AND_SPARK, ReadableRange, outside_reason, unreadable_rows
from etl.rows.placement import PlacedRows, place
from etl.rows.transform import TransformStep
from etl.source.chunk import RawChunk

KEY_NOT_UTF8 = "kafka key is not valid UTF-8; declare the key column as binary to keep such keys"


@dataclass(frozen=True)
class RowSpec:
    """How records become rows: the table, the decoder, the key, the dimensions, the transform."""

    schema: TableSchema
    decoder: Decoder
    key_column: str | None
    dimensions: tuple[DimensionConfig, ...] = ()  # the joined ones enrich each chunk
    transform: str | None = None  # module:function, see etl.rows.transform
    header_columns: tuple[HeaderColumn, ...] = ()  # filled from the record's headers (etl.rows.headers)
    route: str = ""  # a routed job's route: each rejected record's reason starts by naming it
    readable: ReadableRange = HIVE_AND_SPARK  # the timestamps and dates the table's format reads back


@dataclass(frozen=True)
class ChunkRows:
    kept: pa.Table  # in the main file's schema
    rejected: pa.Table | None  # in the rejected file's schema; None when every record was kept
    placed: PlacedRows | None = None  # under event time: each kept row's partition (etl.rows.placement)


class RowPipeline:
    """Turns the chunks of one partition's offset range, in order, into rows."""

    def __init__(self, spec: RowSpec, topic: str, partition: int, lookups: Mapping[str, pa.Table] | None = None,
                 placement: Placement | None = None):
        self._spec, self._topic, self._partition = spec, topic, partition
        self._placement = placement  # given by the event-time task only (etl.job.event_task)
        self.schema = arrow_schema(spec.schema)
        self.rejected_schema = rejected_arrow_schema()
        given = lookups or {}  # the batch's: a route's joins and transform see the dimensions it lists only
        self._lookups = {d.name: given[d.name] for d in spec.dimensions if d.name in given}
        self.unmatched = {d.name: 0 for d in spec.dimensions if d.joined}  # rows with no match, per dimension
        self.ignored_fields: dict[str, int] = {}  # writer-schema field the table lacks -> records carrying it
        self._transform = None
        if spec.transform:
            owned = tuple(c.name for c in LINEAGE_COLUMNS) + ((spec.key_column,) if spec.key_column else ()) \
                + tuple(entry.column for entry in spec.header_columns)
            self._transform = TransformStep(spec.transform, self.schema, owned, self._lookups)
        self.last_offset: int | None = None

    def process(self, chunk: RawChunk) -> ChunkRows:
        offsets = pa.array(chunk.offsets, pa.int64())
        millis = pa.array(chunk.timestamps_ms, pa.int64())
        self._check_chunk(chunk, offsets)
        decoded = self._spec.decoder.decode(chunk.values)
        self._check_decoded(chunk, decoded)
        for name, count in decoded.ignored_fields.items():
            self.ignored_fields[name] = self.ignored_fields.get(name, 0) + count
        wanted = {entry.header for entry in self._spec.header_columns}
        headers = header_values(chunk.headers, wanted) if wanted else {}
        decoded = self._reject_bad_headers(headers, self._reject_bad_keys(chunk, decoded))
        decoded = _reject_late_timestamps(millis, decoded, self._spec.readable)
        rows = self._enriched(self._rows(chunk, offsets, millis, decoded, headers))
        rows, errors = self._transformed(chunk, rows, decoded)
        rows, errors = self._readable(rows, offsets, errors)
        rows, errors, placed = self._placed(rows, offsets, errors)
        self.last_offset = chunk.offsets[-1]
        return ChunkRows(rows, self._rejected_rows(chunk, offsets, millis, errors) if errors else None, placed)

    def rejected(self, chunk: RawChunk, errors: list[tuple[int, str]]) -> pa.Table:
        """Rejected rows for records of `chunk` that never reach `process` (`errors`: index into
        the chunk, reason): a field split's records that no table takes (etl.job.route_task),
        whose reasons name no route."""
        return self._rejected_rows(chunk, pa.array(chunk.offsets, pa.int64()),
                                   pa.array(chunk.timestamps_ms, pa.int64()), errors, in_route=False)

    def _placed(self, rows: pa.Table, offsets: pa.Int64Array, errors: list):
        """Each kept row's partition under event time; rows it must not write join the rejected."""
        if self._placement is None:
            return rows, errors, None
        placed = place(rows, self._placement)
        if not placed.rejected:
            return rows, errors, placed
        rows, errors, keep = _moved_to_rejected(rows, offsets, errors, placed.rejected)
        return rows, errors, replace(placed, keys=placed.keys.filter(keep), late=placed.late.filter(keep))

    def _enriched(self, rows: pa.Table) -> pa.Table:
        if not self.unmatched:
            return rows
        rows, unmatched = enrich(rows, self._spec.dimensions, self._lookups)
        for name, count in unmatched.items():
            self.unmatched[name] += count
        return rows

    def _transformed(self, chunk: RawChunk, rows: pa.Table, decoded: Decoded) -> tuple[pa.Table, list]:
        """Rows the transform kept, and every rejected record: the decoder's and the transform's."""
        if self._transform is None or not rows.num_rows:
            return rows, decoded.errors
        where = f"{self._topic}[{self._partition}] offsets {chunk.offsets[0]}..{chunk.offsets[-1]}"
        result = self._transform.apply(rows, where)
        if not result.rejected:
            return result.kept, decoded.errors
        reason = f"rejected by transform {self._spec.transform}: "
        moved = [(decoded.good[position].as_py(), reason + text) for position, text in result.rejected]
        return result.kept, sorted(decoded.errors + moved)

    def _readable(self, rows: pa.Table, offsets: pa.Int64Array, errors: list) -> tuple[pa.Table, list]:
        """Rows Hive and Spark can read back, and the rejected records plus the others.

        The decoders reject such values themselves; this is the one check on what is really
        written, so that values from dimensions or the transform cannot slip through.
        """
        bad = unreadable_rows(rows, self._spec.readable)
        if not bad:
            return rows, errors
        origin = f"after transform {self._spec.transform}: " if self._spec.transform else ""
        rows, errors, _keep = _moved_to_rejected(rows, offsets, errors, [(p, origin + r) for p, r in bad])
        return rows, errors

    def _check_chunk(self, chunk: RawChunk, offsets: pa.Int64Array) -> None:
        # Out-of-order or repeated offsets would duplicate rows: refuse them, cheaply.
        in_order = len(chunk) == 1 or pc.all(pc.greater(offsets[1:], offsets[:-1])).as_py()
        after_previous = self.last_offset is None or chunk.offsets[0] > self.last_offset
        if not (in_order and after_previous):
            raise KafkaReadError(
                f"{self._topic}[{self._partition}]: chunk offsets {chunk.offsets[0]}..{chunk.offsets[-1]} are not "
                f"strictly increasing after offset {self.last_offset}; the Kafka reader must yield each record "
                "once, in offset order (this is a bug in the reader)"
            )
        if self._spec.key_column and chunk.keys is None:
            raise KafkaReadError(
                f"{self._topic}[{self._partition}]: key column '{self._spec.key_column}' is configured but the "
                "chunk has no keys; the Kafka reader must return keys when key_column is set"
            )
        if self._spec.header_columns and chunk.headers is None:
            raise KafkaReadError(f"{self._topic}[{self._partition}]: header_columns are configured but the chunk has "
                                 "no headers; the Kafka reader must return headers when header_columns is set")

    def _check_decoded(self, chunk: RawChunk, decoded: Decoded) -> None:
        if decoded.table.num_rows != len(decoded.good) or len(decoded.good) + len(decoded.errors) != len(chunk):
            raise EtlError(
                f"decoder {type(self._spec.decoder).__name__} returned {decoded.table.num_rows} rows, "
                f"{len(decoded.good)} indices and {len(decoded.errors)} errors for {len(chunk)} records; "
                "this is a bug in etl.rows.decoders"
            )

    def _reject_bad_keys(self, chunk: RawChunk, decoded: Decoded) -> Decoded:
        """Moves rows whose key cannot fill a string key column to the rejected records."""
        if self._spec.key_column is None or self._key_type() != pa.string() or not len(decoded.good):
            return decoded
        bad = invalid_utf8_positions(pc.take(pa.array(chunk.keys, pa.binary()), decoded.good))
        return _moved_to_errors(decoded, [(position, KEY_NOT_UTF8) for position in bad])

    def _reject_bad_headers(self, headers: dict[str, pa.BinaryArray], decoded: Decoded) -> Decoded:
        """Moves rows whose header cannot fill its string column to the rejected records."""
        if not headers or not len(decoded.good):
            return decoded
        strings = {e.column for e in self._spec.header_columns if self.schema.field(e.column).type == pa.string()}
        return _moved_to_errors(decoded, invalid_header_rows(headers, self._spec.header_columns, strings, decoded.good))

    def _key_type(self) -> pa.DataType:
        return self.schema.field(self._spec.key_column).type

    def _rows(self, chunk: RawChunk, offsets: pa.Int64Array, millis: pa.Int64Array, decoded: Decoded,
              headers: dict[str, pa.BinaryArray]) -> pa.Table:
        """The decoded data columns plus lineage, key and headers, in the file's column order."""
        all_good = len(decoded.good) == len(chunk)

        def of_good_records(array: pa.Array) -> pa.Array:
            return array if all_good else pc.take(array, decoded.good)

        filled = self._lineage(len(decoded.good), of_good_records(_timestamps(millis, self._spec.readable)))
        filled["kafka_offset"] = of_good_records(offsets)
        if self._spec.key_column:
            filled[self._spec.key_column] = of_good_records(pa.array(chunk.keys, pa.binary())).cast(self._key_type())
        for entry in self._spec.header_columns:
            filled[entry.column] = of_good_records(headers[entry.header]).cast(self.schema.field(entry.column).type)
        decoded_names = set(decoded.table.column_names)

        def column(f: pa.Field):
            if f.name in filled:
                return filled[f.name]
            # Columns the decoder does not fill (enriched or derived ones) start as NULL.
            return decoded.table.column(f.name) if f.name in decoded_names else pa.nulls(len(decoded.good), f.type)

        return pa.Table.from_arrays([column(f) for f in self.schema], schema=self.schema)

    def _rejected_rows(self, chunk: RawChunk, offsets: pa.Int64Array, millis: pa.Int64Array,
                       errors: list[tuple[int, str]], in_route: bool = True) -> pa.Table:
        indices = pa.array([index for index, _reason in errors], pa.int64())
        filled = self._lineage(len(errors), pc.take(_timestamps(millis, self._spec.readable), indices))
        filled["kafka_timestamp_ms"] = pc.take(millis, indices)  # as Kafka gave it, even where NULL above
        filled["kafka_offset"] = pc.take(offsets, indices)
        filled["kafka_key"] = _keys_at(chunk, indices)
        filled["raw_value"] = pa.array([chunk.values[index] for index, _reason in errors], pa.binary())
        named = f"[route {self._spec.route}] " if self._spec.route and in_route else ""
        filled["error"] = pa.array([named + reason for _index, reason in errors], pa.string())
        return pa.Table.from_arrays([filled[f.name] for f in self.rejected_schema], schema=self.rejected_schema)

    def _lineage(self, length: int, timestamps: pa.Array) -> dict[str, pa.Array]:
        return {
            "kafka_topic": pa.repeat(pa.scalar(self._topic, pa.string()), length),
            "kafka_partition": pa.repeat(pa.scalar(self._partition, pa.int32()), length),
            "kafka_timestamp": timestamps,
        }


def _timestamps(millis: pa.Int64Array, readable: ReadableRange) -> pa.Array:
    """Record timestamps; NULL where Kafka has none (it reports -1 rather than a time), and where
    the table's readers could not read it back (only rejected records keep such a time, in
    kafka_timestamp_ms)."""
    unknown = pc.or_(pc.less(millis, 0), pc.greater(millis, readable.timestamp_max_ms))
    return pc.if_else(unknown, pa.scalar(None, pa.int64()), millis).cast(pa.timestamp("ms"))


def _reject_late_timestamps(millis: pa.Int64Array, decoded: Decoded, readable: ReadableRange) -> Decoded:
    """Moves the records whose Kafka timestamp the table's readers cannot read back to the rejected records.

    Rejected, not NULLed: a NULL kafka_timestamp would silently change what the row means
    (tables may be partitioned by event time). Earlier times are negative: Kafka's "none".
    """
    late = pc.greater(pc.take(millis, decoded.good), readable.timestamp_max_ms)
    if not pc.any(late).as_py():
        return decoded
    positions = pc.indices_nonzero(late).to_pylist()
    reasons = [f"{outside_reason(f'kafka record timestamp {millis[i].as_py()} ms', pa.timestamp('ms'), readable)}; "
               f"kafka_timestamp_ms keeps it" for i in pc.take(decoded.good, positions).to_pylist()]
    return _moved_to_errors(decoded, list(zip(positions, reasons)))


def _moved_to_errors(decoded: Decoded, moved: list[tuple[int, str]]) -> Decoded:
    """`decoded` less the rows at the given positions, which become errors with their reasons."""
    if not moved:
        return decoded
    keep = mask_without(len(decoded.good), [position for position, _reason in moved])
    errors = [(decoded.good[position].as_py(), reason) for position, reason in moved]
    return Decoded(decoded.table.filter(keep), decoded.good.filter(keep), sorted(decoded.errors + errors))


def _moved_to_rejected(rows: pa.Table, offsets: pa.Int64Array, errors: list, moved: list[tuple[int, str]]):
    """`rows` less the rows at the given positions, and the errors with those rows' records (found
    by offset) and reasons; plus the mask of the rows kept."""
    positions = pa.array([position for position, _reason in moved], pa.int64())
    indices = pc.index_in(pc.take(rows.column("kafka_offset"), positions), value_set=offsets).to_pylist()
    keep = mask_without(rows.num_rows, positions)
    return rows.filter(keep), sorted(errors + [(i, reason) for i, (_p, reason) in zip(indices, moved)]), keep


def _keys_at(chunk: RawChunk, indices: pa.Array) -> pa.Array:
    if chunk.keys is None:
        return pa.nulls(len(indices), pa.binary())
    return pc.take(pa.array(chunk.keys, pa.binary()), indices)
