"""The [dimension <name>] sections: one reference-data source each, a local file, a file on the
warehouse's own HDFS (read through the warehouse's filesystem), or a Hive table, joined to the
rows by a key or only handed to the transform ([job]'s, or with [route] sections the routes'
that list it: etl.config.routes checks those)."""
from __future__ import annotations

import posixpath
import re
from pathlib import Path
from urllib.parse import urlsplit

from etl.config.model import HIVE_NAME_RE, DimensionConfig, DimensionFormat, DimensionKind, JobConfig, WarehouseConfig
from etl.config.keys import SectionKind
from etl.config.section import Section, column_list, matching, resolve
from etl.errors import ConfigError

DIMENSION_SECTION = SectionKind.DIMENSION.prefix  # [dimension <name>]
DIMENSION_FORMATS = {".parquet": DimensionFormat.PARQUET, ".parq": DimensionFormat.PARQUET,
                     ".csv": DimensionFormat.CSV}
HDFS_SCHEMES = ("hdfs", "webhdfs", "swebhdfs")
HIVE_TABLE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}\.[A-Za-z_][A-Za-z0-9_]{0,127}$")


def dimension_sections(parser, path: Path, job: JobConfig, warehouse: WarehouseConfig,
                       routed: bool = False) -> tuple[DimensionConfig, ...]:
    names = [section for section in parser.sections() if section.startswith(DIMENSION_SECTION)]
    dimensions = tuple(_dimension(Section(parser, section, path), job, warehouse, routed) for section in names)
    _check_enriched_once(dimensions, path)
    return dimensions


def _dimension(s: Section, job: JobConfig, warehouse: WarehouseConfig, routed: bool) -> DimensionConfig:
    name = s.name[len(DIMENSION_SECTION):].strip()
    if not HIVE_NAME_RE.match(name):
        raise ConfigError(f"{s.path}: [{s.name}]: {name!r} is not a valid dimension name; "
                          f"write [dimension <name>] with letters, digits and _")
    column = matching(HIVE_NAME_RE, "column name")
    source = s.get("source")
    join_key = s.get("join_key", convert=column)
    dimension_key = s.get("dimension_key", None, column)
    columns = s.get("columns", convert=column_list)
    if join_key is None:
        _check_transform_only(s, job, dimension_key, routed)
    dimension_key = dimension_key or join_key
    if dimension_key in columns:
        raise s.fail("columns", f"lists the key {dimension_key!r}; the row already holds it in {join_key!r}")
    kind, where, file_format = _dimension_source(s, source, warehouse)
    dimension = DimensionConfig(name=name, source=source, kind=kind,
                                path=where if isinstance(where, Path) else None, format=file_format,
                                table=where if kind == DimensionKind.HIVE else None, join_key=join_key,
                                dimension_key=dimension_key, columns=columns,
                                warehouse_path=where if kind == DimensionKind.FILE and isinstance(where, str) else None)
    s.reject_unknown()
    return dimension


def _check_transform_only(s: Section, job: JobConfig, dimension_key: str | None, routed: bool) -> None:
    if dimension_key is not None:
        raise s.fail("dimension_key", "needs join_key (the event column to look up)")
    if job.transform is None and not routed:  # a route's transform: etl.config.routes checks it
        raise s.fail("join_key", "is required: without it the dimension is only handed to [job] transform, "
                                 "which is not set")


def _dimension_source(s: Section, raw: str, warehouse: WarehouseConfig) -> tuple[DimensionKind, object,
                                                                                  DimensionFormat | None]:
    """(HIVE, 'db.table', None), (FILE, Path, PARQUET | CSV) for a local file, or (FILE, str, ...)
    for a file on the warehouse's HDFS, its path there."""
    if urlsplit(raw).scheme in HDFS_SCHEMES:
        on_hdfs = _on_warehouse(s, raw, warehouse)
        return DimensionKind.FILE, on_hdfs, _file_format(s, raw, posixpath.splitext(on_hdfs)[1])
    if raw.startswith("hive:"):
        table = raw[len("hive:"):]
        if not HIVE_TABLE_RE.match(table):
            raise s.fail("source", f"{raw!r}: write a Hive table as hive:database.table")
        return DimensionKind.HIVE, table, None
    if raw.startswith("file:") and not raw.startswith("file:///"):
        raise s.fail("source", f"{raw!r}: write a file URL as file:///absolute/path")
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]+:", raw) and not raw.startswith("file:"):
        raise s.fail("source", f"{raw!r}: use a Parquet (.parquet) or CSV (.csv) file, as file:///absolute/path or "
                               f"a path relative to the config's folder, or hive:database.table")
    where = Path(raw[len("file://"):]) if raw.startswith("file://") else resolve(s.path.parent, raw)
    return DimensionKind.FILE, where, _file_format(s, raw, where.suffix)


def _file_format(s: Section, raw: str, suffix: str) -> DimensionFormat:
    file_format = DIMENSION_FORMATS.get(suffix.lower())
    if file_format is None:
        raise s.fail("source", f"{raw!r}: name a Parquet (.parquet) or CSV (.csv) file, or hive:database.table")
    return file_format


def _on_warehouse(s: Section, raw: str, warehouse: WarehouseConfig) -> str:
    """The path of an hdfs:// or webhdfs:// source on the warehouse's HDFS. It is read through the
    warehouse's own filesystem client (its NameNodes, user and auth), so it must be on that HDFS:
    webhdfs:// with the url's NameNodes, or hdfs:// with hive_location's nameservice (or none)."""
    if not warehouse.is_webhdfs:
        raise s.fail("source", f"{raw!r}: a file on HDFS needs a warehouse on HDFS ([warehouse] url = "
                               f"webhdfs://...), which reads it; with {warehouse.url} copy it to a local file")
    parts = urlsplit(raw)
    ours = {"webhdfs": urlsplit(warehouse.url).netloc, "swebhdfs": urlsplit(warehouse.url).netloc,
            "hdfs": urlsplit(warehouse.hive_root).netloc if warehouse.hive_root.startswith("hdfs://") else None}
    if parts.netloc and parts.netloc != ours[parts.scheme]:
        names = " or ".join(f"{scheme}://{netloc}" for scheme, netloc in (
            ("webhdfs", ours["webhdfs"]), ("hdfs", ours["hdfs"])) if netloc)
        raise s.fail("source", f"{raw!r} is on another HDFS than the warehouse's ({names}); a dimension file on "
                               f"HDFS is read through the warehouse's filesystem: put it there")
    if not parts.path.startswith("/") or parts.query or parts.fragment:
        raise s.fail("source", f"{raw!r}: write a file on HDFS as {parts.scheme}://{parts.netloc}/absolute/path")
    return "/" + posixpath.normpath(parts.path).lstrip("/")


def _check_enriched_once(dimensions: tuple[DimensionConfig, ...], path: Path) -> None:
    filled_by: dict[str, str] = {}
    for dimension in dimensions:
        for column in (dimension.columns if dimension.joined else ()):
            if column.lower() in filled_by:
                raise ConfigError(f"{path}: [dimension {dimension.name}] columns: {column!r} is already added by "
                                  f"[dimension {filled_by[column.lower()]}]; a column is filled by one dimension")
            filled_by[column.lower()] = dimension.name
