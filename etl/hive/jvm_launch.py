"""The driver JVM launched ahead of need: `etl run` launches it before it takes its lock and
plans, so that the JVM boots (0.9 s of a scheduled run's start, docs/performance.md) while the
run talks to ZooKeeper, Kafka and the metastore. A run that then has nothing to do, or whose lock
is held, kills it unused.

pyspark launches the JVM and waits for it in one call, which cannot be abandoned half way, so
this module launches it as pyspark does (Spark's bin/spark-submit with the settings as --conf
and PYSPARK_SUBMIT_ARGS, stdin a pipe the JVM watches so that it dies with this process, and
SIGINT ignored), and waits later. To connect, pyspark's own launch_gateway is then given the
JVM's port and secret, as spark-submit gives them to a job it runs, so that the gateway is
pyspark's, whichever Spark line.
"""
from __future__ import annotations

import atexit
import importlib.util
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Any

POLL_SECONDS = 0.02  # how often the connection file is looked for (pyspark: 0.1 s)
GATEWAY_PORT, GATEWAY_SECRET = "PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET"


class JvmExitedEarly(RuntimeError):
    """The launched JVM exited before it said where its gateway listens (pyspark's
    JAVA_GATEWAY_EXITED): a damaged class archive, or bad options."""


class EarlyJvm:
    def __init__(self, settings: dict[str, str], output_fd: int):
        """Launch now, with `settings` (the SparkContext's, etl.hive.spark.context_settings) and
        the JVM's stdout and stderr on `output_fd` (etl.hive.jvm_output's relay)."""
        self.settings = settings
        self._connected = False
        command = [os.path.join(spark_home(), "bin", "spark-submit")]
        for key, value in settings.items():
            command += ["--conf", f"{key}={value}"]
        command += shlex.split(os.environ.get("PYSPARK_SUBMIT_ARGS", "pyspark-shell"))
        self._folder = tempfile.mkdtemp(prefix="etl-driver-jvm-")
        self._connection_file = os.path.join(self._folder, "connection")
        env = dict(os.environ, SPARK_CONNECT_MODE="0", _PYSPARK_DRIVER_CONN_INFO_PATH=self._connection_file)
        try:
            self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=output_fd, stderr=output_fd,
                                            env=env, preexec_fn=_ignore_sigint)
        except BaseException:
            shutil.rmtree(self._folder, ignore_errors=True)
            raise
        atexit.register(self.abandon)  # a command that fails before it connects leaves nothing behind

    def gateway(self) -> Any:
        """Wait for the JVM, and connect to it: pyspark's gateway, whose `proc` is the JVM."""
        from pyspark.java_gateway import launch_gateway
        from pyspark.serializers import UTF8Deserializer, read_int
        try:
            while self.process.poll() is None and not os.path.isfile(self._connection_file):
                time.sleep(POLL_SECONDS)
            if not os.path.isfile(self._connection_file):  # the JVM writes it whole (a rename)
                raise JvmExitedEarly(f"the driver JVM exited with code {self.process.returncode} before it started")
            with open(self._connection_file, "rb") as info:
                port, secret = read_int(info), UTF8Deserializer().loads(info)
        finally:
            shutil.rmtree(self._folder, ignore_errors=True)
        saved = {name: os.environ.get(name) for name in (GATEWAY_PORT, GATEWAY_SECRET)}
        os.environ.update({GATEWAY_PORT: str(port), GATEWAY_SECRET: secret})
        try:
            gateway = launch_gateway()  # with those two set, it connects and launches nothing
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
        gateway.proc = self.process
        self._connected = True
        return gateway

    def abandon(self) -> None:
        """Kill the JVM unused. Killed before its command line was built, Spark's launcher (a short
        JVM of its own, spark-class's child) finds its reader gone and exits. Nothing once
        connected: the JVM is then the SparkContext's."""
        if self._connected:
            return
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self._folder, ignore_errors=True)


def _ignore_sigint() -> None:
    """As pyspark does: a Ctrl-C meant for `etl` is not the JVM's."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def spark_home() -> str:
    """$SPARK_HOME, else pyspark's own folder (a pip-installed pyspark holds bin/ and jars/), as
    pyspark finds it, but without importing pyspark (0.1 s, of a run that may need no JVM)."""
    found = os.environ.get("SPARK_HOME")
    if found:
        return found
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise RuntimeError("pyspark is not installed, and SPARK_HOME is not set")
    return os.path.dirname(spec.origin)
