"""Event time over a routed range (etl.job.event_task with etl.job.range_shares): a Parquet file
per (range, table, Hive partition) under the range's name, every table of a split covering the
range, the manifest at the job's rejected table listing each part with its table; the task's
open files one budget over its tables (etl.job.split_writer.OpenFiles). On a local folder with
the chunks handed in: no Kafka, no Spark."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from etl.job.split_writer import OpenFiles, PassWriter
from etl.model.partitioning import TimePartitioner
from etl.rows.placement import PlacedRows
from etl.sink.fs import LocalFileSystem

HOUR = 3_600_000
SCHEMA = pa.schema([("n", pa.int64())])


def _writer(tmp_path, table: str, budget, skip=frozenset()) -> PassWriter:
    return PassWriter(LocalFileSystem(), str(tmp_path / table), "r.parquet", TimePartitioner(), SCHEMA, 4, "snappy",
                      skip, budget, {})


def _write(writer: PassWriter, keys: list[int]) -> None:
    placed = PlacedRows(pa.array(keys, pa.int64()), pa.array([False] * len(keys)), [], None)
    writer.write(pa.table({"n": pa.array(range(len(keys)), pa.int64())}), placed)


def test_two_writers_sharing_a_budget_of_two_defer_the_third_key(tmp_path):
    budget = OpenFiles(2, 100)
    a, b = _writer(tmp_path, "a", budget), _writer(tmp_path, "b", budget)
    _write(a, [0, HOUR])
    _write(b, [0])
    assert (a.deferred, b.deferred) == (False, True)
    assert [p.key for p in a.close()] == [0, HOUR] and b.close() == []


def test_the_memory_bound_flushes_the_largest_buffer_across_writers(tmp_path):
    budget = OpenFiles(8, 4)
    a, b = _writer(tmp_path, "a", budget), _writer(tmp_path, "b", budget)
    _write(a, [0, 0, 0])
    _write(b, [0, 0])  # 5 rows buffered over both: a's 3 go out as a row group
    assert [s.buffered_rows for s in budget.sinks] == [0, 2]
    [part] = a.close()
    b.close()
    assert pq.ParquetFile(part.temp_path).metadata.num_row_groups == 1


def test_an_int_budget_is_the_writers_own(tmp_path):
    a, b = _writer(tmp_path, "a", 1), _writer(tmp_path, "b", 1)
    _write(a, [0, HOUR])
    _write(b, [HOUR])
    assert (a.deferred, b.deferred) == (True, False)
    assert [p.key for p in a.close()] == [0] and [p.key for p in b.close()] == [HOUR]
