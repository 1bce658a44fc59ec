"""Enrichment by lookup, and the dimension snapshots a batch pins, without services: the
[dimension] config and start-up checks, the vectorised lookup, the pins. The pipeline tests on
the real stack are tests/integration/test_enrichment_job.py.
"""
from __future__ import annotations

import json
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from etl.config import load_config
from etl.errors import ConfigError, DimensionError
from etl.job import pins
from etl.job.assemble import writer_spec
from etl.job.partition_writer import PartitionWriter
from etl.model.batch import Batch
from etl.model.batch import BatchState
from etl.rows.dimensions import MAX_LISTED_FILES, DimensionLoader, FileStamp, Snapshot
from etl.sink.fs import LocalFileSystem
from etl.sink.fs.webhdfs import WebHdfsFileSystem
from etl.source.chunk import RawChunk
from tests.harness.enrichment import COUNTRIES_CSV, countries_csv, enriched_schema
from tests.harness.webhdfs_server import WebHdfsTestServer


def ini(tmp_path: Path, schema: Path, job: str = "", dimensions: str = "") -> Path:
    """A config for the checks that need no service (nothing here is contacted)."""
    path = tmp_path / f"unit-{uuid.uuid4().hex[:6]}.ini"
    path.write_text(f"[job]\nname = unit\n{job}\n[kafka]\nbootstrap.servers = 127.0.0.1:1\ntopics = t\n"
                    f"[zookeeper]\nhosts = 127.0.0.1:1\n[warehouse]\nurl = file://{tmp_path}/wh\n"
                    f"[hive]\ndatabase = d\ntable = t\nschema = {schema}\n{dimensions}")
    return path


def event(i: int, country: str | None, user: str) -> bytes:
    return json.dumps({"event_id": i, "user_id": user, "country_code": country}).encode()


# -- config and start-up checks, no services --------------------------------------------------
def test_a_dimension_section_is_parsed_with_its_defaults(tmp_path):
    csv = countries_csv(tmp_path)
    config = load_config(ini(tmp_path, enriched_schema(tmp_path),
                             dimensions=f"[dimension countries]\nsource = {csv}\njoin_key = country_code\n"
                                        f"columns = country_name\n"))
    (dimension,) = config.dimensions
    assert (dimension.name, dimension.kind, dimension.path, dimension.format) == ("countries", "file", csv, "csv")
    assert dimension.dimension_key == "country_code" and dimension.columns == ("country_name",)
    assert config.job.on_dimension_change == "fail" and config.job.transform is None


@pytest.mark.parametrize("section, message", [
    ("source = ftp://x/y.csv\njoin_key = a\ncolumns = b", r"\[dimension d\] source: .*Parquet \(\.parquet\) or CSV"),
    ("source = hive:nodot\njoin_key = a\ncolumns = b", r"\[dimension d\] source: .*hive:database\.table"),
    ("source = hive:db.t\ncolumns = b", r"\[dimension d\] join_key: is required: without it .* transform"),
    ("source = hive:db.t\njoin_key = a\ncolumns = a2, a2", r"\[dimension d\] columns: .*once"),
    ("source = hive:db.t\njoin_key = a\ndimension_key = k\ncolumns = k", r"\[dimension d\] columns: lists the key"),
    ("source = hive:db.t\njoin_key = a\ncolumns = b\ncolums = c", r"\[dimension d\] colums: unknown key"),
])
def test_a_bad_dimension_section_names_its_key(tmp_path, section, message):
    with pytest.raises(ConfigError, match=message):
        load_config(ini(tmp_path, enriched_schema(tmp_path), dimensions=f"[dimension d]\n{section}\n"))


def test_on_dimension_change_is_one_of_fail_or_use_current(tmp_path):
    with pytest.raises(ConfigError, match=r"\[job\] on_dimension_change: 'later' is not one of fail, use_current"):
        load_config(ini(tmp_path, enriched_schema(tmp_path), job="on_dimension_change = later"))


def test_a_column_missing_from_the_ddl_fails_at_start_up_naming_it(tmp_path):
    csv = countries_csv(tmp_path, "code,population\nDE,83\n")
    config = load_config(ini(tmp_path, enriched_schema(tmp_path),
                             dimensions=f"[dimension countries]\nsource = {csv}\njoin_key = country_code\n"
                                        f"dimension_key = code\ncolumns = population\n"))
    with pytest.raises(ConfigError, match=r"\[dimension countries\] columns: 'population' is not declared in "
                                          r".*enriched.sql; add 'population <type>'") as error:
        writer_spec(config)
    assert error.value.exit_code == 2


def test_a_source_type_that_does_not_fit_the_ddl_fails_at_start_up(tmp_path):
    source = tmp_path / "countries.parquet"
    pq.write_table(pa.table({"code": ["DE"], "country_name": [3.5]}), source)
    config = load_config(ini(tmp_path, enriched_schema(tmp_path),
                             dimensions=f"[dimension countries]\nsource = file://{source}\njoin_key = country_code"
                                        f"\ndimension_key = code\ncolumns = country_name\n"))
    with pytest.raises(ConfigError, match=r"column 'country_name' .* is double, which does not fit the DDL's string"):
        writer_spec(config)


def test_a_key_that_is_not_unique_fails_the_load_naming_it(tmp_path):
    csv = countries_csv(tmp_path, "code,country_name\nDE,Germany\nDE,Deutschland\n")
    config = load_config(ini(tmp_path, enriched_schema(tmp_path),
                             dimensions=f"[dimension countries]\nsource = {csv}\njoin_key = country_code\n"
                                        f"dimension_key = code\ncolumns = country_name\n"))
    schema = writer_spec(config).schema
    loader = DimensionLoader(config.dimensions, lambda _dimension: schema, spark=lambda: None)
    with pytest.raises(DimensionError, match=r"key 'code' is not unique .*'DE' appears 2 times"):
        loader.load_all()


def test_the_lookup_keeps_row_order_and_offsets_and_counts_unmatched(tmp_path):
    csv = countries_csv(tmp_path)
    config = load_config(ini(tmp_path, enriched_schema(tmp_path),
                             dimensions=f"[dimension countries]\nsource = {csv}\njoin_key = country_code\n"
                                        f"dimension_key = code\ncolumns = country_name\n"))
    spec = writer_spec(config)
    loader = DimensionLoader(config.dimensions, lambda _dimension: spec.schema, lambda: None)
    tables = {n: d.table for n, d in loader.load_all().items()}
    main, rejected = str(tmp_path / "_tmp.main"), str(tmp_path / "_tmp.rejected")
    codes = ["FR", None, "DE", "XX", "DE", "FR"]
    with PartitionWriter(LocalFileSystem(), spec, "t", 0, main, rejected, tables) as writer:
        writer.write(RawChunk(list(range(10, 16)), [0] * 6, None, [event(i, c, "u") for i, c in enumerate(codes)]))
        writer.write(RawChunk([16, 17], [0, 0], None, [b"not json", event(7, "XX", "u")]))
    counts = writer.close()
    table = pq.read_table(main)
    assert table.column("kafka_offset").to_pylist() == [10, 11, 12, 13, 14, 15, 17]
    assert table.column("country_name").to_pylist() == ["France", None, "Germany", None, "Germany", "France", None]
    assert counts.unmatched == {"countries": 3} and counts.rejected == 1
    assert json.loads(pq.ParquetFile(main).metadata.metadata[b"etl.unmatched"]) == {"countries": 3}


def test_a_pin_lists_a_few_files_and_only_a_digest_of_many():
    stamps = [FileStamp(f"/dim/part-{i}", 10, 1_000 + i) for i in range(MAX_LISTED_FILES + 1)]
    few, many = Snapshot.of("hive:d.t", "/dim", stamps[:3]), Snapshot.of("hive:d.t", "/dim", stamps)
    assert Snapshot.from_json(few.to_json()) == few and len(few.to_json()["files"]) == 3
    assert many.to_json()["files"] == [] and Snapshot.from_json(many.to_json()) == many
    touched = Snapshot.of("hive:d.t", "/dim", stamps[:-1] + [FileStamp(stamps[-1].path, 10, 5)])
    assert touched != many and "/dim: 101 files, 1010 bytes" in pins.change_error(
        Batch(1, BatchState.PLANNED, "", {}, ()), ["d"], {"d": many}, {"d": touched}).args[0]


def test_a_gone_source_can_only_be_restored():
    pinned = Snapshot.of("/x.csv", "/x.csv", [FileStamp("/x.csv", 5, 0)])
    message = str(pins.change_error(Batch(7, BatchState.PLANNED, "", {}, ()), ["d"], {"d": pinned}, {"d": None}))
    assert "batch 7" in message and "pinned /x.csv (size 5, modified 1970-01-01" in message
    assert "now it is gone" in message and "Restore d (a source that is gone cannot be used" in message


# -- a dimension file on the warehouse's HDFS ---------------------------------------------------
def hdfs_ini(tmp_path: Path, url: str, source: str) -> Path:
    path = ini(tmp_path, enriched_schema(tmp_path),
               dimensions=f"[dimension countries]\nsource = {source}\njoin_key = country_code\n"
                          f"dimension_key = code\ncolumns = country_name\n")
    return Path(path).write_text(path.read_text().replace(
        f"url = file://{tmp_path}/wh", f"url = {url}/wh\nhive_location = hdfs://ns1/wh\nuser = etl")) and path


@pytest.mark.parametrize("source", ["webhdfs://127.0.0.1:{port}/dims/countries.csv", "hdfs://ns1/dims/countries.csv",
                                    "hdfs:///dims/countries.csv"])
def test_a_dimension_file_on_the_hdfs_warehouse_is_read_through_its_filesystem_and_pinned(tmp_path, source):
    with WebHdfsTestServer(tmp_path / "served") as server:
        url = server.webhdfs_url("")
        config = load_config(hdfs_ini(tmp_path, url, source.format(port=url.rpartition(":")[2])))
        (dimension,) = config.dimensions
        assert (dimension.path, dimension.warehouse_path, dimension.format) == (None, "/dims/countries.csv", "csv")
        fs = WebHdfsFileSystem(config.warehouse)
        with fs.open_write("/dims/countries.csv") as out:
            out.write(COUNTRIES_CSV.encode())
        schema = writer_spec(config).schema  # a file on HDFS is checked when it is loaded, not at start-up
        loader = DimensionLoader(config.dimensions, lambda _dimension: schema, lambda: None, files=fs)
        loaded = loader.load_all()["countries"]
        assert loaded.table.to_pydict() == {"code": ["DE", "FR"], "country_name": ["Germany", "France"]}
        assert loaded.snapshot.location == "/dims/countries.csv"
        assert [(f.path, f.size) for f in loaded.snapshot.files] == [("/dims/countries.csv", len(COUNTRIES_CSV))]

        fs.delete("/dims/countries.csv")  # replaced: another version, pinned apart from the first
        with fs.open_write("/dims/countries.csv") as out:
            out.write(b"code,country_name\nDE,Deutschland\n")
        assert loader.snapshot(dimension) != loaded.snapshot
        fs.delete("/dims/countries.csv")
        assert loader.snapshot(dimension) is None
        with pytest.raises(DimensionError, match=r"dimension countries: source .* does not exist"):
            loader.load_all()


@pytest.mark.parametrize("url, source, message", [
    ("file", "hdfs://ns1/dims/c.csv", r"\[dimension countries\] source: .*on HDFS needs a warehouse on HDFS"),
    ("webhdfs", "hdfs://other/dims/c.csv", r"\[dimension countries\] source: .*another HDFS than the warehouse's"),
    ("webhdfs", "webhdfs://elsewhere:1/dims/c.csv", r"\[dimension countries\] source: .*another HDFS than the "),
    ("webhdfs", "hdfs://ns1/dims/c.txt", r"\[dimension countries\] source: .*Parquet \(\.parquet\) or CSV"),
])
def test_a_dimension_on_hdfs_must_be_on_the_warehouse_s_own(tmp_path, url, source, message):
    path = hdfs_ini(tmp_path, "webhdfs://127.0.0.1:9870", source) if url == "webhdfs" else \
        ini(tmp_path, enriched_schema(tmp_path), dimensions=f"[dimension countries]\nsource = {source}\n"
                                                            f"join_key = country_code\ncolumns = country_name\n")
    with pytest.raises(ConfigError, match=message):
        load_config(path)
