"""Dimension sources: reference data loaded once per batch on the driver, pinned in the plan.

Each [dimension] is read once per batch (pyarrow for a Parquet or CSV file, local or on the
warehouse's HDFS through the warehouse's filesystem; Spark, then Arrow, for a Hive table),
checked (its key unique, its columns castable without loss to the DDL's types) and handed to
the tasks as Arrow IPC bytes in a Spark broadcast.

A batch's plan pins the snapshot of every dimension it used: a file's path, size and
modification time (on HDFS, the NameNode's, in milliseconds); a Hive table's location and the
files listed with their sizes and modification times. A batch resumed after a crash compares
the pins with what is there now, so that one batch's files never mix two versions of reference
data unless the operator chose so ([job] on_dimension_change). Each snapshot is taken before
and after the read; a source that changed while it was read is read again.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import os
from dataclasses import dataclass, field
from typing import BinaryIO, Callable, Protocol

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from etl import spark_line
from etl.config import DimensionConfig, DimensionFormat, DimensionKind
from etl.errors import ConfigError, DimensionError
from etl.model.schema import TableSchema, arrow_type

READ_ATTEMPTS = 3
# A Hive table's files are listed in the pin up to this many; beyond, the pin keeps their
# digest and totals only, so that a batch header stays far below ZooKeeper's 1 MB limit.
MAX_LISTED_FILES = 100


class _FileInfo(Protocol):
    @property
    def size(self) -> int: ...

    @property
    def modified(self) -> float: ...  # seconds since the epoch


class WarehouseFiles(Protocol):
    """What the loader needs of the warehouse's filesystem (etl.sink.fs, which rows may not
    import: the job hands it down) to read a dimension file on the warehouse's HDFS."""

    def info(self, path: str) -> _FileInfo | None: ...

    def open_read(self, path: str) -> BinaryIO: ...


@dataclass(frozen=True)
class FileStamp:
    path: str
    size: int
    modified_ns: int

    def describe(self) -> str:
        when = dt.datetime.fromtimestamp(self.modified_ns / 1e9, dt.timezone.utc).isoformat(timespec="milliseconds")
        return f"{self.path} (size {self.size}, modified {when})"


@dataclass(frozen=True)
class Snapshot:
    """Which version of a dimension's data a batch used. Two snapshots are equal when their
    source, location and every file's path, size and modification time are."""

    source: str  # the [dimension] source as configured
    location: str  # the file, or the Hive table's location
    digest: str  # of every file's path, size and modification time
    count: int
    size: int
    files: tuple[FileStamp, ...] = field(default=(), compare=False)  # empty past MAX_LISTED_FILES

    @classmethod
    def of(cls, source: str, location: str, stamps) -> "Snapshot":
        stamps = tuple(sorted(stamps, key=lambda f: f.path))
        text = "\n".join(f"{f.path}\t{f.size}\t{f.modified_ns}" for f in stamps)
        return cls(source, location, hashlib.sha256(text.encode()).hexdigest(), len(stamps),
                   sum(f.size for f in stamps), stamps if len(stamps) <= MAX_LISTED_FILES else ())

    @property
    def listed(self) -> bool:
        return len(self.files) == self.count

    def to_json(self) -> dict:
        return {"source": self.source, "location": self.location, "digest": self.digest, "count": self.count,
                "bytes": self.size, "files": [[f.path, f.size, f.modified_ns] for f in self.files]}

    @classmethod
    def from_json(cls, raw: dict) -> "Snapshot":
        return cls(raw["source"], raw["location"], raw["digest"], int(raw["count"]), int(raw["bytes"]),
                   tuple(FileStamp(p, int(s), int(m)) for p, s, m in raw["files"]))

    def describe(self) -> str:
        if self.count == 1 and self.files[0].path == self.location:
            return self.files[0].describe()
        newest = f", newest {max(self.files, key=lambda f: f.modified_ns).describe()}" if self.files else ""
        return f"{self.location}: {self.count} files, {self.size} bytes{newest}"


@dataclass(frozen=True)
class LoadedDimension:
    config: DimensionConfig
    snapshot: Snapshot
    table: pa.Table  # joined: key + columns cast to the DDL's types, keys unique and not NULL


def describe_change(pinned: Snapshot | None, current: Snapshot | None) -> str:
    if pinned is None:
        return "it was not used when the batch was planned"
    if current is None:
        return f"pinned {pinned.describe()}; now it is gone"
    if not (pinned.listed and current.listed):
        return f"pinned {pinned.describe()}; now {current.describe()}"
    before = {f.path: f for f in pinned.files}
    after = {f.path: f for f in current.files}
    changed = [p for p in before.keys() & after.keys() if before[p] != after[p]]
    detail = ", ".join(f"{label} {len(paths)} (e.g. {sorted(paths)[0]})" for label, paths in
                       (("files added", after.keys() - before.keys()), ("removed", before.keys() - after.keys()),
                        ("changed", changed)) if paths)
    return f"pinned {pinned.describe()}; now {current.describe()}" + (f" [{detail}]" if detail else "")


def to_ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def from_ipc(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


class DimensionLoader:
    """Takes snapshots of and loads the job's dimensions; `spark` is asked for only when a
    Hive table is a source. `schema_of(dimension)`: the DDL a joined dimension's key and
    columns are cast to (with routes, a route's that joins it: etl.job.assemble.dimension_schema).
    `files`: the warehouse's filesystem, which reads the files on the warehouse's HDFS."""

    def __init__(self, dimensions: tuple[DimensionConfig, ...], schema_of: Callable[[DimensionConfig], TableSchema],
                 spark: Callable[[], object], files: WarehouseFiles | None = None):
        self.dimensions, self._schema_of, self._spark, self._files = dimensions, schema_of, spark, files

    def snapshot(self, dimension: DimensionConfig) -> Snapshot | None:
        """What the source is now; None when it is gone."""
        if dimension.kind == DimensionKind.HIVE:
            return _hive_snapshot(self._spark(), dimension)
        if dimension.warehouse_path is not None:
            return _warehouse_snapshot(self._warehouse_files(dimension), dimension)
        return _file_snapshot(dimension)

    def load_all(self) -> dict[str, LoadedDimension]:
        return {d.name: self.load(d) for d in self.dimensions}

    def load(self, dimension: DimensionConfig) -> LoadedDimension:
        for _attempt in range(READ_ATTEMPTS):
            before = self.snapshot(dimension)
            if before is None:
                raise DimensionError(f"dimension {dimension.name}: source {dimension.source} does not exist; "
                                     f"restore it or fix [dimension {dimension.name}] source")
            raw = self._read(dimension)
            if self.snapshot(dimension) == before:
                return LoadedDimension(dimension, before, self._prepared(dimension, raw))
        raise DimensionError(f"dimension {dimension.name}: {dimension.source} changed while it was read, "
                             f"{READ_ATTEMPTS} times; replace reference data atomically (write elsewhere, then "
                             f"rename) and run again")

    def check_source(self, dimension: DimensionConfig) -> None:
        """Start-up check of a file source: it exists and has the columns, of castable types."""
        if dimension.kind != DimensionKind.FILE or dimension.path is None:
            return  # a Hive source, or a file on HDFS, is checked when it is loaded, once the clients run
        if not dimension.path.is_file():
            raise ConfigError(f"[dimension {dimension.name}] source: {dimension.path} does not exist")
        if dimension.format == DimensionFormat.PARQUET:
            try:
                schema = pq.read_schema(dimension.path)
            except (OSError, pa.ArrowException) as exc:
                raise ConfigError(f"[dimension {dimension.name}] source: cannot read {dimension.path} as "
                                  f"Parquet: {exc}") from exc
            self._check_columns(dimension, schema.names, ConfigError)
            for name in self._wanted(dimension):
                _castable(dimension, name, schema.field(name).type, self._target_type(dimension, name), ConfigError)

    # -- reading --------------------------------------------------------------------------
    def _wanted(self, dimension: DimensionConfig) -> list[str]:
        return ([dimension.dimension_key] if dimension.joined else []) + list(dimension.columns)

    def _target_type(self, dimension: DimensionConfig, name: str) -> pa.DataType | None:
        """The DDL type a joined dimension's column must become; None: keep the source's."""
        if not dimension.joined:
            return None
        ddl_column = dimension.join_key if name == dimension.dimension_key else name
        return arrow_type(self._schema_of(dimension).column(ddl_column).hive_type)

    def _read(self, dimension: DimensionConfig) -> pa.Table:
        if dimension.kind == DimensionKind.HIVE:
            return self._read_hive(dimension)
        where = dimension.path if dimension.warehouse_path is None else dimension.warehouse_path
        try:
            # A file on HDFS is read whole into memory once: it is broadcast whole anyway.
            source = dimension.path if dimension.warehouse_path is None else self._warehouse_bytes(dimension)

            def opened():
                return pa.BufferReader(source) if isinstance(source, bytes) else source
            if dimension.format == DimensionFormat.PARQUET:
                self._check_columns(dimension, pq.read_schema(opened()).names, DimensionError)
                return pq.read_table(opened(), columns=self._wanted(dimension))
            return self._read_csv(dimension, opened)
        except (OSError, pa.ArrowException) as exc:
            raise DimensionError(f"dimension {dimension.name}: cannot read {where}: {exc}") from exc

    def _read_csv(self, dimension: DimensionConfig, opened: Callable[[], object]) -> pa.Table:
        wanted = self._wanted(dimension)
        with pa_csv.open_csv(opened()) as reader:
            header = reader.schema.names
        self._check_columns(dimension, header, DimensionError)
        types = {name: self._target_type(dimension, name) for name in wanted if dimension.joined}
        options = pa_csv.ConvertOptions(include_columns=wanted, column_types=types)
        return pa_csv.read_csv(opened(), convert_options=options)

    def _warehouse_files(self, dimension: DimensionConfig) -> WarehouseFiles:
        if self._files is None:
            raise DimensionError(f"dimension {dimension.name}: {dimension.source} is on the warehouse's HDFS, but "
                                 f"this command was given no warehouse filesystem to read it through")
        return self._files

    def _warehouse_bytes(self, dimension: DimensionConfig) -> bytes:
        with self._warehouse_files(dimension).open_read(str(dimension.warehouse_path)) as handle:
            return handle.read()

    def _read_hive(self, dimension: DimensionConfig) -> pa.Table:
        spark = self._spark()
        try:
            frame = spark.table(dimension.table)
            self._check_columns(dimension, frame.columns, DimensionError)
            return spark_line.current().to_arrow(frame.select(*self._wanted(dimension)))
        except DimensionError:
            raise
        except Exception as exc:
            raise DimensionError(f"dimension {dimension.name}: cannot read Hive table {dimension.table}: "
                                 f"{str(exc).strip().splitlines()[0] if str(exc).strip() else exc!r}") from exc

    def _check_columns(self, dimension: DimensionConfig, present, error) -> None:
        missing = [name for name in self._wanted(dimension) if name not in present]
        if missing:
            raise error(f"[dimension {dimension.name}]: source {dimension.source} has no column {missing[0]!r} "
                        f"(it has {', '.join(present)}); fix dimension_key/columns or the source")

    # -- checking -------------------------------------------------------------------------
    def _prepared(self, dimension: DimensionConfig, raw: pa.Table) -> pa.Table:
        if not dimension.joined:
            return raw.combine_chunks()
        columns = [_cast(dimension, name, raw.column(name), self._target_type(dimension, name))
                   for name in self._wanted(dimension)]
        table = pa.Table.from_arrays(columns, names=self._wanted(dimension))
        table = table.filter(pc.is_valid(table.column(dimension.dimension_key)))  # a NULL key matches nothing
        _check_unique(dimension, table)
        return table.combine_chunks()


def _file_snapshot(dimension: DimensionConfig) -> Snapshot | None:
    try:
        stat = os.stat(dimension.path)
    except FileNotFoundError:
        return None
    path = str(dimension.path)
    return Snapshot.of(dimension.source, path, [FileStamp(path, stat.st_size, stat.st_mtime_ns)])


def _warehouse_snapshot(files: WarehouseFiles, dimension: DimensionConfig) -> Snapshot | None:
    path = str(dimension.warehouse_path)
    info = files.info(path)
    if info is None:
        return None
    # HDFS keeps milliseconds: as Hive tables' stamps are, in nanoseconds
    return Snapshot.of(dimension.source, path, [FileStamp(path, info.size, round(info.modified * 1000) * 1_000_000)])


def _hive_snapshot(spark, dimension: DimensionConfig) -> Snapshot | None:
    """The table's location and its files (all partitions), as the metastore and the
    filesystem see them now."""
    if not spark.catalog.tableExists(dimension.table):
        return None
    spark.catalog.refreshTable(dimension.table)  # Spark caches file listings
    session = spark._jsparkSession
    identifier = session.sessionState().sqlParser().parseTableIdentifier(dimension.table)
    location = session.sessionState().catalog().getTableMetadata(identifier).location().toString()
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    stamps = []
    for name in sorted(spark.table(dimension.table).inputFiles()):
        path = spark._jvm.org.apache.hadoop.fs.Path(name)
        status = path.getFileSystem(hadoop).getFileStatus(path)
        stamps.append(FileStamp(name, status.getLen(), status.getModificationTime() * 1_000_000))
    return Snapshot.of(dimension.source, location, stamps)


def _cast(dimension: DimensionConfig, name: str, values: pa.ChunkedArray, target: pa.DataType) -> pa.ChunkedArray:
    _castable(dimension, name, values.type, target, DimensionError)
    try:
        return values.cast(target, safe=True)
    except pa.ArrowException as exc:
        raise DimensionError(f"dimension {dimension.name}: column {name!r} of {dimension.source} does not fit "
                             f"{target} without loss: {exc}") from exc


def _castable(dimension: DimensionConfig, name: str, source: pa.DataType, target: pa.DataType, error) -> None:
    if not _compatible(source, target):
        raise error(f"[dimension {dimension.name}]: column {name!r} of {dimension.source} is {source}, which does not "
                    f"fit the DDL's {target} without loss; change the DDL's type or the source")


def _compatible(source: pa.DataType, target: pa.DataType) -> bool:
    """Whether every value of `source` fits `target` (a widening, never a narrowing)."""
    types = pa.types
    if pa.types.is_dictionary(source):
        source = source.value_type
    if source == target or types.is_null(source):
        return True
    if types.is_integer(source) and types.is_integer(target):
        return target.bit_width > source.bit_width or (
            target.bit_width == source.bit_width and types.is_signed_integer(source) == types.is_signed_integer(target))
    if types.is_integer(source) and types.is_floating(target):
        return source.bit_width < target.bit_width
    if types.is_floating(source) and types.is_floating(target):
        return target.bit_width >= source.bit_width
    if types.is_decimal(source) and types.is_decimal(target):
        return target.scale >= source.scale and target.precision - target.scale >= source.precision - source.scale
    same_family = (types.is_string, types.is_large_string), (types.is_binary, types.is_large_binary), \
        (types.is_timestamp,), (types.is_date,)
    return any(any(f(source) for f in family) and any(f(target) for f in family) for family in same_family)


def _check_unique(dimension: DimensionConfig, table: pa.Table) -> None:
    key = dimension.dimension_key
    if pc.count_distinct(table.column(key)).as_py() == table.num_rows:
        return
    counts = table.group_by(key).aggregate([(key, "count")])
    duplicated = counts.filter(pc.greater(counts.column(f"{key}_count"), 1)).slice(0, 1).to_pylist()[0]
    raise DimensionError(f"dimension {dimension.name}: key {key!r} is not unique in {dimension.source}: "
                         f"{duplicated[key]!r} appears {duplicated[f'{key}_count']} times; a lookup must find at "
                         f"most one row, so deduplicate the source")
