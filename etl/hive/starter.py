"""The command's one SparkContext and SparkSession, each started where it is first asked for
(etl.hive.spark makes them)."""
from __future__ import annotations

import contextlib
import logging
import threading
from pathlib import Path
from typing import Any, Callable

from etl.config import Config
from etl.hive.class_archive import quarantine
from etl.hive.spark import EarlyLaunch, driver_jvm_exited, hive_session, start_context_mapping

log = logging.getLogger(__name__)

JVM_DEATH_CHECK_SECONDS = 1.0  # how long a failed command waits to learn whether the driver JVM died
WARM_UP_PATIENCE_SECONDS = 60.0  # how long a failed command waits for Spark's start-up work


class SparkStarter:
    """The command's one SparkContext, and at most one SparkSession on it, each started where it
    is first asked for, explicitly.

    A run with nothing to do never asks, and so costs a few ZooKeeper and Kafka calls rather
    than a Spark start (the JVM `etl run` launched early is killed unused); a run on existing
    tables asks for the context alone (its tasks). Whatever needs Spark (the tasks, DDL, the
    dimension loader) is given this object, or its `context` or `session` method, and asks."""

    def __init__(self, config: Config, on_start: Callable[[object], object] | None = None,
                 timing: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext,
                 early: EarlyLaunch | None = None):
        """`on_start(context)` runs once, right after the SparkContext started; should it return a
        thread (work it began in the background), a failed command waits for it. `timing()`
        wraps the start (the run's SPARK phase). `early`: the driver JVM `etl run` launched
        before it imported and planned (etl.hive.spark.launch_early), which `context()` connects
        to."""
        self._config = config
        self._context: Any = None
        self._session: Any = None
        self._on_start = on_start
        self._timing = timing
        self._started: object = None
        self._mapped_archive: Path | None = None
        self._early = early

    def settle_after_failure(self, patience_seconds: float = WARM_UP_PATIENCE_SECONDS) -> None:
        """When a command fails after Spark started (a refusal: a table another job owns, a
        schema change), the work `on_start` began may still run: the Python workers' warm-up
        (etl.job.warm_up) takes seconds. Left to the JVM's exit, its tasks lost their workers
        under them, and Spark logged "Python worker exited unexpectedly (crashed)" ERROR lines
        after the command's one message. So it is waited for, as a successful run's batch waits
        for it, and cancelled only should it outlast `patience_seconds`."""
        self._quarantine_if_the_jvm_died()
        if not isinstance(self._started, threading.Thread):
            return
        self._started.join(patience_seconds)
        if self._started.is_alive() and self._context is not None:
            log.warning("Spark's start-up work still ran after %.0f s; cancelling it", patience_seconds)
            self._context.cancelAllJobs()

    def _quarantine_if_the_jvm_died(self) -> None:
        """A damaged class archive can crash the JVM later than its start: when a class it holds
        is first used (a Hive call, say). This command has failed then; the archive is moved
        aside so that the next one starts without it, and records a whole one."""
        if self._mapped_archive is not None and driver_jvm_exited(JVM_DEATH_CHECK_SECONDS):
            quarantine(self._mapped_archive, "made the driver JVM exit during the command")
            self._mapped_archive = None

    def context(self):
        if self._context is None:
            with self._timing():
                self._context, self._mapped_archive = start_context_mapping(self._config, self._early)
            if self._on_start is not None:
                self._started = self._on_start(self._context)
        return self._context

    def session(self):
        """The SparkSession with Hive support, on `context()`."""
        if self._session is None:
            self.context()
            with self._timing():
                self._session = hive_session()
        return self._session
