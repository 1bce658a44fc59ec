"""Start Spark's Python workers as soon as the SparkContext is up, ahead of the batch's tasks.

In a fresh `etl run` the batch's first tasks used to wait about 3 s for Python workers to
start and import pyarrow, confluent-kafka and the ETL, while, just before, the executors sat
idle through the Hive table check (seconds of Hive client calls). So, as soon as the
SparkContext is up, one task per executor slot starts a worker and imports the task modules, on
a thread of its own; the workers are reused by the batch's tasks (spark.python.worker.reuse,
Spark's default). It is only a head start: should it fail, the batch's tasks start workers as
before. With the Thrift metastore client the tables are checked before the SparkContext starts,
and the batch's tasks follow the warm-up at once: the head start is then small.
"""
from __future__ import annotations

import logging
import os
import threading

log = logging.getLogger(__name__)

WARM_UP_GROUP = "etl-warm-up"


def warm_python_workers(context) -> threading.Thread:
    """Run the warm-up job in the background, on the SparkContext; returns its thread (tests join it)."""
    thread = threading.Thread(target=_warm, args=(context,), name="etl-warm-up", daemon=True)
    thread.start()
    return thread


def _warm(context) -> None:
    slots = context.defaultParallelism
    try:
        context.setJobGroup(WARM_UP_GROUP, "start the Python workers", interruptOnCancel=False)
        pids = context.parallelize(range(slots), slots).map(_import_task_modules).collect()
    except Exception as exc:  # noqa: BLE001 -- a head start only; the batch's tasks start workers anyway
        # Also how it ends when the run stops Spark first (nothing to do, an error): not a problem.
        log.debug("warming the Python workers stopped: %s", exc)
        return
    log.debug("Python workers started ahead of the batch: %d (pids %s)", len(set(pids)), sorted(set(pids)))


def _import_task_modules(_slot: int) -> int:
    import etl.job.tasks  # noqa: F401 -- the import is the work: pyarrow, confluent-kafka and the ETL's rows
    return os.getpid()
