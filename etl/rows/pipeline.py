"""Streams one Kafka partition's share of a batch into one Parquet file, plus one file of
rejected records when some could not be decoded.

The main file is always created, even with no rows, because its existence is what marks
the offset range as done. Rows are written in row groups of exactly row_group_size rows as
soon as enough are buffered, so memory stays bounded by one row group plus one chunk however
many records the range holds. Timestamps are written as INT96: Hive 2.x cannot read Parquet's
INT64 timestamps.

Each decoded chunk is then enriched from the batch's dimensions (etl.rows.enrichment) and passed
through the job's transform (etl.rows.transform), both vectorised; rows the transform rejects go to
the rejected file with their raw message. So do records whose values Hive or Spark could not
read back (etl.rows.hive_values): a Kafka timestamp beyond year 9999, checked before decoding is
used, and, just before the main file, any out-of-range value in any column, wherever it came
from (decoder, dimension, transform). One such row would make every query of the table fail.
How many rows found no match in each dimension is stored in the main file's footer (key
etl.unmatched), so that a replay can count them again.

Both files are written under the temp names the caller chose; publishing them is the
commit protocol's job, not this module's.
"""
from __future__ import annotations

import io
import json
import logging
import os
from dataclasses import dataclass, field
from typing import BinaryIO, Mapping

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from etl.config import DimensionConfig
from etl.rows.decoders import Decoded, Decoder, invalid_utf8_positions, mask_without
from etl.rows.enrichment import enrich
from etl.errors import ConfigError, EtlError, KafkaReadError, WarehouseError
from etl.rows.hive_values import TIMESTAMP_MAX_MS, outside_reason, unreadable_rows
from etl.model.schema import LINEAGE_COLUMNS, TableSchema, arrow_schema, rejected_arrow_schema
from etl.rows.transform import TransformStep

COMPRESSIONS = ("snappy", "zstd", "gzip", "none")
UNMATCHED_METADATA_KEY = b"etl.unmatched"
KEY_NOT_UTF8 = "kafka key is not valid UTF-8; declare the key column as binary to keep such keys"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RawChunk:
    """Consecutive records of one partition, as the Kafka reader yields them, in offset order."""

    offsets: list[int]
    timestamps_ms: list[int]  # CreateTime or LogAppendTime; negative when the broker has none
    keys: list[bytes | None] | None  # None when keys are not configured
    values: list[bytes | None]

    def __post_init__(self):
        lengths = {len(self.offsets), len(self.timestamps_ms), len(self.values)}
        if self.keys is not None:
            lengths.add(len(self.keys))
        if len(lengths) > 1:
            raise KafkaReadError(
                f"chunk has {len(self.offsets)} offsets, {len(self.timestamps_ms)} timestamps, "
                f"{len(self.values)} values and {'no' if self.keys is None else len(self.keys)} keys; "
                "the Kafka reader must yield one of each per record (this is a bug in the reader)"
            )

    def __len__(self) -> int:
        return len(self.offsets)


@dataclass(frozen=True)
class WriterSpec:
    """Everything a task needs to write files; built once by the driver and pickled to tasks."""

    schema: TableSchema
    decoder: Decoder
    key_column: str | None
    row_group_size: int
    compression: str  # snappy | zstd | gzip | none
    dimensions: tuple[DimensionConfig, ...] = ()  # the joined ones enrich each chunk
    transform: str | None = None  # module:function, see etl.rows.transform

    def __post_init__(self):
        if self.compression not in COMPRESSIONS:
            raise ConfigError(
                f"compression {self.compression!r} is not supported; set [job] compression to one of "
                f"{', '.join(COMPRESSIONS)}"
            )
        if self.row_group_size < 1:
            raise ConfigError(f"row_group_size is {self.row_group_size}; set [job] row_group_size to at least 1")
        if self.key_column != self.schema.key_column:
            raise ConfigError(
                f"key_column {self.key_column!r} differs from the schema's {self.schema.key_column!r}; "
                "load the schema with load_table_schema(path, key_column) using the same key column"
            )


@dataclass(frozen=True)
class WriteCounts:
    records: int  # records read: rows + rejected
    rows: int
    rejected: int
    bytes_written: int  # size of the main file
    rejected_bytes_written: int  # size of the rejected file; 0 when none was created
    row_groups: int  # in the main file
    first_offset: int | None  # None when no records were written
    last_offset: int | None
    unmatched: Mapping[str, int] = field(default_factory=dict)  # per joined dimension: rows with no match


class PartitionWriter:
    """Writes the chunks of one partition's offset range to main_path (and rejected_path).

    Use as a context manager: an exception inside the block aborts, which deletes both
    files; leaving the block normally closes.
    """

    def __init__(self, fs, spec: WriterSpec, topic: str, partition: int, main_path: str, rejected_path: str,
                 lookups: Mapping[str, pa.Table] | None = None):
        self._spec = spec
        self._topic = topic
        self._partition = partition
        self._main = _ParquetSink(fs, main_path, arrow_schema(spec.schema), spec)
        self._rejected = _ParquetSink(fs, rejected_path, rejected_arrow_schema(), spec)
        self._lookups = lookups or {}
        self._unmatched = {d.name: 0 for d in spec.dimensions if d.joined}
        self._transform = None
        if spec.transform:
            owned = tuple(c.name for c in LINEAGE_COLUMNS) + ((spec.key_column,) if spec.key_column else ())
            self._transform = TransformStep(spec.transform, self._main.schema, owned, self._lookups)
        self._records = 0
        self._first_offset: int | None = None
        self._last_offset: int | None = None
        self._counts: WriteCounts | None = None
        self._aborted = False
        # Created up front: a bad path should fail before any Kafka data is read.
        try:
            self._main.open()
        except BaseException:
            self._main.abort()
            raise

    def __enter__(self) -> PartitionWriter:
        return self

    def __exit__(self, exc_type, exc, traceback) -> None:
        if exc_type is not None:
            self.abort()
        elif not self._aborted:
            self.close()

    def write(self, chunk: RawChunk) -> None:
        self._check_writable()
        if not len(chunk):
            return
        offsets = pa.array(chunk.offsets, pa.int64())
        millis = pa.array(chunk.timestamps_ms, pa.int64())
        self._check_chunk(chunk, offsets)
        decoded = self._spec.decoder.decode(chunk.values)
        self._check_decoded(chunk, decoded)
        decoded = _reject_late_timestamps(millis, self._reject_bad_keys(chunk, decoded))
        rows = self._enriched(self._rows(chunk, offsets, millis, decoded))
        rows, errors = self._transformed(chunk, rows, decoded)
        rows, errors = self._readable(rows, offsets, errors)
        self._main.append(rows)
        if errors:
            self._rejected.append(self._rejected_rows(chunk, offsets, millis, errors))
        self._records += len(chunk)
        self._first_offset = chunk.offsets[0] if self._first_offset is None else self._first_offset
        self._last_offset = chunk.offsets[-1]

    def close(self) -> WriteCounts:
        """Finish both files and say what was written. Calling it again returns the same counts."""
        if self._counts is None:
            self._check_writable()
            try:
                self._counts = self._finish()
            except BaseException:
                self.abort()
                raise
        return self._counts

    def abort(self) -> None:
        """Close and delete whatever files this writer created. Never raises."""
        self._aborted = True
        self._main.abort()
        self._rejected.abort()

    def _enriched(self, rows: pa.Table) -> pa.Table:
        if not self._unmatched:
            return rows
        rows, unmatched = enrich(rows, self._spec.dimensions, self._lookups)
        for name, count in unmatched.items():
            self._unmatched[name] += count
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
        bad = unreadable_rows(rows)
        if not bad:
            return rows, errors
        positions = pa.array([position for position, _reason in bad], pa.int64())
        indices = pc.index_in(pc.take(rows.column("kafka_offset"), positions), value_set=offsets).to_pylist()
        origin = f"after transform {self._spec.transform}: " if self._spec.transform else ""
        moved = [(index, origin + reason) for index, (_position, reason) in zip(indices, bad)]
        return rows.filter(mask_without(rows.num_rows, positions)), sorted(errors + moved)

    def _finish(self) -> WriteCounts:
        if self._unmatched:
            self._main.metadata[UNMATCHED_METADATA_KEY] = json.dumps(self._unmatched, sort_keys=True).encode()
        main_bytes = self._main.close()
        rejected_bytes = self._rejected.close() if self._rejected.rows_appended else 0
        return WriteCounts(
            records=self._records,
            rows=self._main.rows_appended,
            rejected=self._rejected.rows_appended,
            bytes_written=main_bytes,
            rejected_bytes_written=rejected_bytes,
            row_groups=self._main.row_groups,
            first_offset=self._first_offset,
            last_offset=self._last_offset,
            unmatched=dict(self._unmatched),
        )

    def _check_writable(self) -> None:
        if self._aborted:
            raise EtlError(f"the writer of {self._topic}[{self._partition}] was aborted; start a new one")
        if self._counts is not None:
            raise EtlError(f"the writer of {self._topic}[{self._partition}] is closed; start a new one")

    def _check_chunk(self, chunk: RawChunk, offsets: pa.Int64Array) -> None:
        # Out-of-order or repeated offsets would duplicate rows: refuse them, cheaply.
        in_order = len(chunk) == 1 or pc.all(pc.greater(offsets[1:], offsets[:-1])).as_py()
        after_previous = self._last_offset is None or chunk.offsets[0] > self._last_offset
        if not (in_order and after_previous):
            raise KafkaReadError(
                f"{self._topic}[{self._partition}]: chunk offsets {chunk.offsets[0]}..{chunk.offsets[-1]} are not "
                f"strictly increasing after offset {self._last_offset}; the Kafka reader must yield each record "
                "once, in offset order (this is a bug in the reader)"
            )
        if self._spec.key_column and chunk.keys is None:
            raise KafkaReadError(
                f"{self._topic}[{self._partition}]: key column '{self._spec.key_column}' is configured but the "
                "chunk has no keys; the Kafka reader must return keys when key_column is set"
            )

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

    def _key_type(self) -> pa.DataType:
        return self._main.schema.field(self._spec.key_column).type

    def _rows(self, chunk: RawChunk, offsets: pa.Int64Array, millis: pa.Int64Array, decoded: Decoded) -> pa.Table:
        """The decoded data columns plus lineage and key, in the file's column order."""
        all_good = len(decoded.good) == len(chunk)

        def of_good_records(array: pa.Array) -> pa.Array:
            return array if all_good else pc.take(array, decoded.good)

        filled = self._lineage(len(decoded.good), of_good_records(_timestamps(millis)))
        filled["kafka_offset"] = of_good_records(offsets)
        if self._spec.key_column:
            filled[self._spec.key_column] = of_good_records(pa.array(chunk.keys, pa.binary())).cast(self._key_type())
        schema = self._main.schema
        decoded_names = set(decoded.table.column_names)

        def column(f: pa.Field):
            if f.name in filled:
                return filled[f.name]
            # Columns the decoder does not fill (enriched or derived ones) start as NULL.
            return decoded.table.column(f.name) if f.name in decoded_names else pa.nulls(len(decoded.good), f.type)

        return pa.Table.from_arrays([column(f) for f in schema], schema=schema)

    def _rejected_rows(self, chunk: RawChunk, offsets: pa.Int64Array, millis: pa.Int64Array,
                       errors: list[tuple[int, str]]) -> pa.Table:
        indices = pa.array([index for index, _reason in errors], pa.int64())
        filled = self._lineage(len(errors), pc.take(_timestamps(millis), indices))
        filled["kafka_timestamp_ms"] = pc.take(millis, indices)  # as Kafka gave it, even where NULL above
        filled["kafka_offset"] = pc.take(offsets, indices)
        filled["kafka_key"] = _keys_at(chunk, indices)
        filled["raw_value"] = pa.array([chunk.values[index] for index, _reason in errors], pa.binary())
        filled["error"] = pa.array([reason for _index, reason in errors], pa.string())
        return pa.Table.from_arrays([filled[f.name] for f in self._rejected.schema], schema=self._rejected.schema)

    def _lineage(self, length: int, timestamps: pa.Array) -> dict[str, pa.Array]:
        return {
            "kafka_topic": pa.repeat(pa.scalar(self._topic, pa.string()), length),
            "kafka_partition": pa.repeat(pa.scalar(self._partition, pa.int32()), length),
            "kafka_timestamp": timestamps,
        }


def _timestamps(millis: pa.Int64Array) -> pa.Array:
    """Record timestamps; NULL where Kafka has none (it reports -1 rather than a time), and where
    Hive could not read it back (only rejected records keep such a time, in kafka_timestamp_ms)."""
    unknown = pc.or_(pc.less(millis, 0), pc.greater(millis, TIMESTAMP_MAX_MS))
    return pc.if_else(unknown, pa.scalar(None, pa.int64()), millis).cast(pa.timestamp("ms"))


def _reject_late_timestamps(millis: pa.Int64Array, decoded: Decoded) -> Decoded:
    """Moves the records whose Kafka timestamp Hive cannot read back to the rejected records.

    Rejected, not NULLed: a NULL kafka_timestamp would silently change what the row means
    (tables may be partitioned by event time). Earlier times are negative: Kafka's "none".
    """
    late = pc.greater(pc.take(millis, decoded.good), TIMESTAMP_MAX_MS)
    if not pc.any(late).as_py():
        return decoded
    positions = pc.indices_nonzero(late).to_pylist()
    reasons = [f"{outside_reason(f'kafka record timestamp {millis[i].as_py()} ms', pa.timestamp('ms'))}; "
               f"kafka_timestamp_ms keeps it" for i in pc.take(decoded.good, positions).to_pylist()]
    return _moved_to_errors(decoded, list(zip(positions, reasons)))


def _moved_to_errors(decoded: Decoded, moved: list[tuple[int, str]]) -> Decoded:
    """`decoded` less the rows at the given positions, which become errors with their reasons."""
    if not moved:
        return decoded
    keep = mask_without(len(decoded.good), [position for position, _reason in moved])
    errors = [(decoded.good[position].as_py(), reason) for position, reason in moved]
    return Decoded(decoded.table.filter(keep), decoded.good.filter(keep), sorted(decoded.errors + errors))


def _keys_at(chunk: RawChunk, indices: pa.Array) -> pa.Array:
    if chunk.keys is None:
        return pa.nulls(len(indices), pa.binary())
    return pc.take(pa.array(chunk.keys, pa.binary()), indices)


class _ParquetSink:
    """One Parquet file, written in row groups of exactly row_group_size rows but the last."""

    def __init__(self, fs, path: str, schema: pa.Schema, spec: WriterSpec):
        self.fs = fs
        self.path = path
        self.schema = schema
        self.row_group_size = spec.row_group_size
        self.compression = spec.compression
        self.rows_appended = 0
        self.row_groups = 0
        self.metadata: dict[bytes, bytes] = {}  # footer key-value metadata, written at close
        self._buffer: list[pa.Table] = []
        self._buffered_rows = 0
        self._file: BinaryIO | None = None
        self._writer: pq.ParquetWriter | None = None

    def open(self) -> None:
        if self._file is None:
            self._file = self.fs.open_write(self.path)
            self._writer = pq.ParquetWriter(
                where=self._file,
                schema=self.schema,
                compression=self.compression,
                use_deprecated_int96_timestamps=True,
            )

    def append(self, table: pa.Table) -> None:
        self._buffer.append(table)
        self._buffered_rows += table.num_rows
        self.rows_appended += table.num_rows
        if self._buffered_rows >= self.row_group_size:
            self._write_full_row_groups()

    def close(self) -> int:
        """Flush the remaining rows, finish the file durably, and return its size."""
        self.open()
        if self._buffered_rows:
            self._write_row_group(pa.concat_tables(self._buffer))
            self._buffer, self._buffered_rows = [], 0
        if self.metadata:
            self._writer.add_key_value_metadata(self.metadata)
        self._writer.close()
        _close_durably(self._file)
        info = self.fs.info(self.path)
        if info is None:
            raise WarehouseError(f"{self.path} vanished right after it was written; check what else writes there")
        return info.size

    def abort(self) -> None:
        if self._file is None:
            return
        # A remote upload that can abort (WebHDFS) must not be finished by close() just to be deleted.
        steps = [getattr(self._file, "abort", self._file.close), lambda: self.fs.delete(self.path)]
        if self._writer is not None:
            steps.insert(0, self._writer.close)
        for step in steps:
            try:
                step()
            except Exception as exc:  # the error that caused the abort matters more
                log.warning("while aborting %s: %s", self.path, exc)
        self._buffer, self._buffered_rows = [], 0

    def _write_full_row_groups(self) -> None:
        # concat_tables copies nothing; the remainder stays a slice of the last chunk(s).
        buffered = pa.concat_tables(self._buffer)
        full = buffered.num_rows - buffered.num_rows % self.row_group_size
        for start in range(0, full, self.row_group_size):
            self._write_row_group(buffered.slice(start, self.row_group_size))
        rest = buffered.slice(full)
        self._buffer, self._buffered_rows = ([rest] if rest.num_rows else []), rest.num_rows

    def _write_row_group(self, table: pa.Table) -> None:
        self.open()
        self._writer.write_table(table, row_group_size=self.row_group_size)
        self.row_groups += 1


def _close_durably(file: BinaryIO) -> None:
    """Close so that the bytes survive a crash: the offsets committed after this rely on them."""
    file.flush()
    try:
        os.fsync(file.fileno())
    except (AttributeError, io.UnsupportedOperation):
        pass  # not a local file: its own close() is the durability point
    file.close()
