"""One Spark task by planning time: one Kafka partition-batch into one published Parquet file
(by event time, one per Hive partition: etl.job.event_task; etl.job.write_mode picks).

Runs on an executor. The task owns exactly one planned range. It writes nothing when the
range's final file already exists (a replay); otherwise it streams the range into temp
files and publishes them, the rejected file first and the main file last, so that the main
file's existence means the whole range's rows are written. Then each rollup of the table gets
the range's partial (etl.job.rollup_task), also on a replay that found the main file in place.

The batch's dimension tables reach the task as Spark broadcasts of Arrow IPC bytes (one copy
per executor, fetched once), and are opened only when the task has a file to write.
"""
from __future__ import annotations

import json
import posixpath
import re
from typing import Mapping

from etl import errors, faults
from etl.errors import EtlError, Retryable, TaskFailed, TaskFailedRetryable
from etl.job.partition_writer import IGNORED_FIELDS_METADATA_KEY, UNMATCHED_METADATA_KEY, PartitionWriter
from etl.job.rollup_task import publish_partials
from etl.job.range_task import RangeResult, RangeTask, last_record, opened_tables, range_chunks
from etl.job.route_task import run_split_range_task
from etl.model.batch import Batch
from etl.model.naming import REJECTED_FORMAT, temp_name
from etl.sink.commit import publish
from etl.sink.file_format import footer_rows, read_footer
from etl.sink.fs import WarehouseFileSystem, filesystem_for


def run_range_task(task: RangeTask, lookups: Mapping[str, object] | None = None) -> RangeResult:
    """The planning-time task. `lookups`: dimension name -> Spark broadcast of the table's Arrow
    IPC bytes."""
    if task.split is not None:  # a topic routes share, split by a field: a file per table, then a manifest
        return run_split_range_task(task, lookups)
    fs = filesystem_for(task.warehouse)
    main_final = posixpath.join(task.main_dir, task.range.name_as(task.writer.layout.file_format))
    if fs.exists(main_final):
        result = _replayed(fs, task, main_final)
    else:
        result = _write_and_publish(fs, task, main_final, opened_tables(lookups))
        faults.checkpoint(f"renamed:{task.range.partition}")
    publish_partials(fs, task.writer.rollups, task.rollup_dirs, main_final, task.writer.layout,
                     task.range.file_range.stem, task.range.partition)
    return result


def _write_and_publish(fs: WarehouseFileSystem, task: RangeTask, main_final: str, tables) -> RangeResult:
    r = task.range
    main_temp = posixpath.join(task.main_dir, temp_name(posixpath.basename(main_final)))
    rejected_final = posixpath.join(task.rejected_dir, r.name_as(REJECTED_FORMAT))
    rejected_temp = posixpath.join(task.rejected_dir, temp_name(r.name_as(REJECTED_FORMAT)))
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
    return RangeResult(r, published, counts.rows, counts.rejected, counts.unmatched, counts.ignored_fields,
                       last_record(last))


def _replayed(fs: WarehouseFileSystem, task: RangeTask, main_final: str) -> RangeResult:
    rejected_final = posixpath.join(task.rejected_dir, task.range.name_as(REJECTED_FORMAT))
    footer = read_footer(fs, main_final, task.writer.layout.file_format)
    unmatched = json.loads(footer.metadata.get(UNMATCHED_METADATA_KEY, b"{}"))
    ignored = json.loads(footer.metadata.get(IGNORED_FIELDS_METADATA_KEY, b"{}"))
    rejected = footer_rows(fs, rejected_final, REJECTED_FORMAT)
    return RangeResult(task.range, False, footer.rows, rejected, unmatched, ignored)


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
