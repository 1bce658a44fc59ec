"""The promise at its edges (tests/integration/test_edges.py), the part without services: which
error a failed task is reported by. It failed on the code before it.
"""
from __future__ import annotations


def test_a_failed_task_is_reported_by_the_etl_error_it_raised_not_by_a_later_wrapper_line():
    # Seen once in the broker-stop crash test: Spark quoted the task's Python error, then a
    # "PythonException: [PYTHON_EXCEPTION] ... Traceback" line, and the message named that.
    from etl.model.batch import Batch, BatchState
    from etl.job.tasks import task_failure

    text = ("An error occurred while calling o1.collect.\n"
            "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
            "  File \"tasks.py\", line 1, in run\n"
            "etl.errors.KafkaReadError: t[0]: no progress for 5.0s at offset 12; is the broker up?\n"
            "PythonException: [PYTHON_EXCEPTION] An exception was thrown from the Python worker: Traceback "
            "(most recent call last): ... SQLSTATE: 38000)\n")
    batch = Batch(batch_id=3, state=BatchState.PLANNED, planned_at="", partition_values={}, ranges=())
    message = str(task_failure(batch, RuntimeError(text)))
    assert "etl.errors.KafkaReadError: t[0]: no progress for 5.0s at offset 12; is the broker up?" in message
    assert "Traceback" not in message
