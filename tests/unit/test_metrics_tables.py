"""The `table` label of a run's batch metrics (etl.ops.metrics_tables): a routed job's rows,
files and bytes have one series per table, its rejected rows the rejected table's, its offsets
and late rows none; a one-table job's series are as they were (one, labelled with its table)."""
from __future__ import annotations

from pathlib import Path

import pytest

from etl.config.model import HiveFormat
from etl.config import load_config
from etl.job.summary import BatchSummary
from etl.model.batch import TABLE_ROWS_KEY, Batch, BatchState, OffsetRange
from etl.ops.metrics import FAILURE, RunMetrics, build_registry
from etl.ops.metrics_tables import written_files
from etl.sink.fs.local import LocalFileSystem
from etl.sink.warehouse import Warehouse
from tests.harness.config_file import TWO_ROUTES, minimal_ini, routed_ini
from tests.harness.paths import EVENTS_SCHEMA

HOUR = {"dt": "2026-11-21", "hour": "10"}
RANGES = (OffsetRange("app.x", 0, 0, 5, None), OffsetRange("orders", 0, 0, 3, None), OffsetRange("refunds", 1, 0, 4, 0))
TABLES = {"app.x": ["raw_app_x"], "orders": ["orders"], "refunds": ["orders"]}


def _config(tmp_path: Path, ini: str):
    path = tmp_path / "etl.ini"
    path.write_text(ini.replace("file:///tmp/w", f"file://{tmp_path}/w")
                    + f"[metrics]\ntextfile = {tmp_path}/j1.prom\n")
    return load_config(path)


def _batch(batch_id: int, rows: dict[str, int], rejected: int) -> Batch:
    return Batch(batch_id, BatchState.COMMITTED, "2026-11-21T10:30:00+00:00", dict(HOUR), RANGES, tables=TABLES,
                 rows=sum(rows.values()), rejected=rejected, extra={TABLE_ROWS_KEY: rows})


def _series(metrics: RunMetrics) -> dict[tuple[str, str], float]:
    return {(s.name, s.labels["table"]): s.value
            for f in build_registry(metrics, FAILURE, 1, read_state=False).collect()
            for s in f.samples if "table" in s.labels}


def _committed(metrics: RunMetrics, batch: Batch) -> None:
    metrics.batch_committed(BatchSummary.of(batch, False, 1.0, 0), batch)


def test_a_routed_run_has_a_rows_series_per_table_and_the_rest_once(tmp_path):
    metrics = RunMetrics(_config(tmp_path, routed_ini(TWO_ROUTES)))
    _committed(metrics, _batch(1, {"orders": 6, "raw_app_x": 4}, rejected=2))
    _committed(metrics, _batch(2, {"orders": 1, "raw_app_x": 0}, rejected=0))
    assert _series(metrics) == {
        ("etl_run_rows", "db.orders"): 7, ("etl_run_rows", "db.raw_app_x"): 4,
        ("etl_run_rejected_rows", "db.rejects"): 2,  # the rejected table every route shares
        ("etl_run_offsets", ""): 24, ("etl_run_late_rows", ""): 0}  # the job's: no one table's


def test_a_one_table_runs_series_are_as_they_were(tmp_path):
    metrics = RunMetrics(_config(tmp_path, minimal_ini(EVENTS_SCHEMA)))
    assert _series(metrics) == {("etl_run_rows", "db.t"): 0, ("etl_run_rejected_rows", "db.t"): 0,
                                ("etl_run_offsets", "db.t"): 0, ("etl_run_late_rows", "db.t"): 0}


@pytest.mark.parametrize("file_format", list(HiveFormat))
@pytest.mark.parametrize("routed", [True, False])
def test_written_files_are_counted_in_the_folder_of_their_table(tmp_path, routed, file_format):
    """The tables' files in their format, the rejected table's as Parquet (they went uncounted on ORC)."""
    hive = f"format = {file_format.value}"
    config = _config(tmp_path, routed_ini(TWO_ROUTES, hive=f"rejected_table = rejects\n{hive}") if routed
                     else minimal_ini(EVENTS_SCHEMA, kafka="topics = app.x", hive=hive))
    warehouse, fs = Warehouse.of(config), LocalFileSystem()
    batch = _batch(1, {}, 0)
    placed = {warehouse.for_table("raw_app_x").main_dir(HOUR): RANGES[:1],
              warehouse.for_table("orders").main_dir(HOUR): RANGES[1:]} if routed \
        else {warehouse.main_dir(HOUR): RANGES}
    for folder, ranges in placed.items():
        fs.makedirs(folder)
        for r in ranges:
            (Path(folder) / r.name_as(file_format)).write_bytes(b"x" * 10)
        (Path(folder) / "not-of-this-batch.parquet").write_bytes(b"y")
    fs.makedirs(warehouse.rejected_dir(HOUR))
    (Path(warehouse.rejected_dir(HOUR)) / RANGES[0].name_as(HiveFormat.PARQUET)).write_bytes(b"r" * 3)
    expected = {"db.raw_app_x": (1, 10), "db.orders": (2, 20), "db.rejects": (1, 3)} if routed \
        else {"db.t": (4, 33)}
    assert written_files(fs, config, warehouse, [batch]) == expected
