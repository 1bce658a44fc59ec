"""One Spark task: one Kafka partition-batch into one published Parquet file (by event time,
one per Hive partition: etl.job.event_task).

Runs on an executor. The task owns exactly one planned range. It writes nothing when the
range's final file already exists (a replay); otherwise it streams the range into temp
files and publishes them, the rejected file first and the main file last, so that the main
file's existence means the whole range is done.

The batch's dimension tables reach the task as Spark broadcasts of Arrow IPC bytes (one copy
per executor, fetched once), and are opened only when the task has a file to write.
"""
from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass, field
from typing import Mapping

import pyarrow.parquet as pq

from etl import errors, faults
from etl.config import KafkaConfig, WarehouseConfig
from etl.errors import EtlError, Retryable, TaskFailed, TaskFailedRetryable
from etl.job.event_task import range_chunks, run_event_range_task
from etl.job.partition_writer import IGNORED_FIELDS_METADATA_KEY, UNMATCHED_METADATA_KEY, PartitionWriter, WriterSpec
from etl.model.batch import Batch, OffsetRange
from etl.model.identity import RecordFingerprint, fingerprint
from etl.model.naming import temp_name
from etl.model.partitioning import Placement
from etl.rows.dimensions import from_ipc
from etl.sink.commit import publish
from etl.sink.fs import WarehouseFileSystem, filesystem_for
from etl.sink.manifest import Part


@dataclass(frozen=True)
class RangeTask:
    range: OffsetRange
    main_dir: str
    rejected_dir: str
    warehouse: WarehouseConfig
    kafka: KafkaConfig
    consumer_group: str
    writer: WriterSpec
    placement: Placement | None = None  # by event time: a file per Hive partition (etl.job.event_task)
    table_root: str = ""
    max_open_files: int = 32
    # By event time: partition path -> folder (relative to table_root) of the compacted partitions
    relocated: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RangeResult:
    range: OffsetRange
    published: bool  # False: the file was already there (replay or a racing attempt)
    rows: int
    rejected: int
    unmatched: Mapping[str, int] = field(default_factory=dict)  # per joined dimension: rows with no match
    ignored_fields: Mapping[str, int] = field(default_factory=dict)  # writer-schema field the table lacks
    # The range's last record, the witness of the topic's identity (etl.model.identity); None on a
    # replay (the file was there: nothing was read) or when the range held no record.
    last_record: RecordFingerprint | None = None
    parts: tuple[Part, ...] = ()  # by event time: the range's file in each Hive partition
    max_event_ms: int | None = None


def run_range_task(task: RangeTask, lookups: Mapping[str, object] | None = None) -> RangeResult:
    """`lookups`: dimension name -> Spark broadcast of the table's Arrow IPC bytes."""
    fs = filesystem_for(task.warehouse)
    if task.placement is not None and task.placement.by_event_time:
        return _by_event_time(fs, task, lookups)
    main_final = posixpath.join(task.main_dir, task.range.file_name)
    if fs.exists(main_final):
        return _replayed(fs, task, main_final)
    tables = {name: from_ipc(handle.value) for name, handle in (lookups or {}).items()}
    result = _write_and_publish(fs, task, main_final, tables)
    faults.checkpoint(f"renamed:{task.range.partition}")
    return result


def _by_event_time(fs: WarehouseFileSystem, task: RangeTask, lookups) -> RangeResult:
    tables = {name: from_ipc(handle.value) for name, handle in (lookups or {}).items()}
    manifest, published = run_event_range_task(fs, task, tables)
    faults.checkpoint(f"renamed:{task.range.partition}")
    last = RecordFingerprint.from_json(manifest.last_record)  # the manifest keeps it: a replay has it too
    return RangeResult(task.range, published, manifest.rows, manifest.rejected, manifest.unmatched,
                       manifest.ignored_fields, last, manifest.parts, manifest.max_event_ms)


def _write_and_publish(fs: WarehouseFileSystem, task: RangeTask, main_final: str, tables) -> RangeResult:
    r = task.range
    main_temp = posixpath.join(task.main_dir, temp_name(r.file_name))
    rejected_final = posixpath.join(task.rejected_dir, r.file_name)
    rejected_temp = posixpath.join(task.rejected_dir, temp_name(r.file_name))
    with PartitionWriter(fs, task.writer, r.topic, r.partition, main_temp, rejected_temp, tables) as writer:
        last = None
        for chunk in range_chunks(task):
            writer.write(chunk)
            last = chunk
            faults.checkpoint(f"writing:{r.partition}")
        counts = writer.close()
    faults.checkpoint(f"closed:{r.partition}")
    if counts.rejected:
        publish(fs, rejected_temp, rejected_final)
    published = publish(fs, main_temp, main_final)
    witness = fingerprint(last.offsets[-1], last.timestamps_ms[-1], last.values[-1]) if last else None
    return RangeResult(r, published, counts.rows, counts.rejected, counts.unmatched, counts.ignored_fields, witness)


def _replayed(fs: WarehouseFileSystem, task: RangeTask, main_final: str) -> RangeResult:
    rejected_final = posixpath.join(task.rejected_dir, task.range.file_name)
    with fs.open_read(main_final) as handle:
        footer = pq.ParquetFile(handle).metadata
    metadata = footer.metadata or {}
    unmatched = json.loads(metadata.get(UNMATCHED_METADATA_KEY, b"{}"))
    ignored = json.loads(metadata.get(IGNORED_FIELDS_METADATA_KEY, b"{}"))
    return RangeResult(task.range, False, footer.num_rows, parquet_rows(fs, rejected_final), unmatched, ignored)


def parquet_rows(fs: WarehouseFileSystem, path: str) -> int:
    """Row count from the footer alone; 0 when the file does not exist."""
    if not fs.exists(path):
        return 0
    with fs.open_read(path) as handle:
        return pq.ParquetFile(handle).metadata.num_rows


_PY_ERROR = re.compile(r"^(etl\.errors\.\w+|\w*Error|\w*Exception): (.+)$", re.MULTILINE)


def task_failure(batch: Batch, exc: Exception) -> EtlError:
    """Turn a failed Spark job into one clear error: the task's own Python error if found."""
    text = str(exc)
    found = _PY_ERROR.findall(text)
    # The ETL's own error, where the task raised one: Spark may also quote other errors after it
    # (a wrapper's "[PYTHON_EXCEPTION] ... Traceback" line, a sibling task's), which name nothing.
    own = [match for match in found if match[0].startswith("etl.errors.")]
    found = own or found
    cause = f"{found[-1][0]}: {found[-1][1]}" if found else text.strip().splitlines()[0]
    named = getattr(errors, found[-1][0].removeprefix("etl.errors."), None) if own else None
    # The exit code follows the task's own error: a broker that stopped answering is worth a retry.
    failed = TaskFailedRetryable if isinstance(named, type) and issubclass(named, Retryable) else TaskFailed
    return failed(f"batch {batch.batch_id}: a task failed: {cause}. The batch stays PLANNED; files already "
                  f"published are kept and the next run writes the rest")
