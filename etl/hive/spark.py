"""The driver's Spark: its SparkContext with the job's [spark] settings, started where the tasks
first need it, and a SparkSession with Hive support on it, made only where a statement needs
one (DDL, compaction, verify --deep). A scheduled run on existing tables with the Thrift
metastore client (etl.hive.thrift_catalog) makes none: the session and Spark's Hive client were
1.0-1.2 s of its start (docs/performance.md)."""
from __future__ import annotations

import atexit
import contextlib
import logging
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from etl import logs, spark_line
from etl.config import Config
from etl.hive.class_archive import ArchivePlan, checksum_holds, finish_recording, plan_archive, quarantine
from etl.hive.jvm_launch import EarlyJvm, JvmExitedEarly
from etl.hive.jvm_output import launched_into_a_relay, started_relay

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
# The driver JVM's log4j2 config: warnings and errors only (package data; see the file). With JSON
# logs the Spark line's overlay goes over it (etl.spark_line.SparkLine.driver_log4j2_json).
DRIVER_LOG4J2 = Path(__file__).with_name("log4j2-driver.properties")
DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
METASTORE_FILTER_HOOK = "spark.hadoop.hive.metastore.filter.hook"
CATALOG_IMPLEMENTATION = "spark.sql.catalogImplementation"
AUTHORIZATION_FILTER_HOOK = "org.apache.hadoop.hive.ql.security.authorization.plugin.AuthorizationMetaStoreFilterHook"
JVM_EXIT_SECONDS = 10  # how long a failed start waits to learn whether the driver JVM died


def build_spark(config: Config):
    """The session (on a new SparkContext: `start_context`)."""
    start_context(config)
    return hive_session()


def start_context(config: Config):
    """The SparkContext. Should the driver JVM die while starting with its class archive (the JDK
    crashes on some damaged archives), the archive is moved aside and the JVM started again
    without it. Should the JVM rather raise a LinkageError (class data read wrong), the archive
    is moved aside and this command fails: a cache never fails two commands."""
    return start_context_mapping(config)[0]


def hive_session():
    """A SparkSession with Hive support on the running SparkContext: its settings, the metastore's
    among them, are the context's (`_start`)."""
    from pyspark.sql import SparkSession
    return SparkSession.builder.enableHiveSupport().getOrCreate()


def start_context_mapping(config: Config, early: EarlyLaunch | None = None) -> tuple[Any, Path | None]:
    """start_context's SparkContext, and the class archive its JVM maps (None: it maps none); on
    the JVM `early` launched, if given (`launch_early`) and its archive is whole."""
    if early is not None and not early.archive_holds():
        early = None  # killed: a new JVM starts, with a whole archive or recording one
    archive = early.archive if early else _class_archive(config)
    try:
        return _start(config, archive, early.jvm if early else None), archive.mapped if archive else None
    except Exception as exc:
        if archive is None or archive.mapped is None:
            raise
        if not _driver_jvm_died(exc):
            if _linkage_error(exc):  # class data read wrong: the archive, though its checksum held
                quarantine(archive.mapped, f"made the driver JVM fail while it started ({_first_line(exc)})")
            raise  # the JVM lives on with the archive mapped: only the next command can do without it
        quarantine(archive.mapped, f"made the driver JVM exit while it started ({_first_line(exc)})")
    archive = _class_archive(config)  # records a new one, unless another process does
    return _start(config, archive), archive.mapped if archive else None


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else 'no message'}"


def _linkage_error(exc: Exception) -> bool:
    """Whether the JVM raised a java.lang.LinkageError (NoSuchMethodError, VerifyError, ...):
    with Spark's own jars, a sign of damaged class data."""
    from py4j.protocol import Py4JJavaError
    from pyspark import SparkContext
    if not isinstance(exc, Py4JJavaError) or SparkContext._jvm is None:
        return False
    linkage = SparkContext._jvm.java.lang.Class.forName("java.lang.LinkageError")
    return bool(linkage.isInstance(exc.java_exception))


def driver_jvm_exited(within_seconds: float) -> bool:
    """Whether the driver JVM this process launched has exited (it is still alive, or was never
    launched by us: False), waiting at most `within_seconds` for it."""
    from pyspark import SparkContext
    process = getattr(SparkContext._gateway, "proc", None)
    try:
        process.wait(within_seconds)
    except (AttributeError, subprocess.TimeoutExpired):
        return False
    return True


def _driver_jvm_died(exc: Exception) -> bool:
    """Whether the JVM pyspark launched is dead: before it could be connected to (pyspark's
    JAVA_GATEWAY_EXITED), or later, while the session was being set up (its process has exited).
    A dead JVM's gateway is forgotten, so that the next session launches a new one."""
    if isinstance(exc, JvmExitedEarly) or spark_line.current().error_condition(exc) == "JAVA_GATEWAY_EXITED":
        return True
    if not driver_jvm_exited(JVM_EXIT_SECONDS):  # a crashing JVM writes its report first
        return False
    _forget_dead_jvm()
    return True


def _forget_dead_jvm() -> None:
    """Drop pyspark's class-level handles on a JVM that died. A JVM that dies after the
    SparkContext was made but before the session was leaves that context active: getOrCreate
    would hand the dead context to the next session, whose JVM view is then None (pyspark
    4.2 asserts on it)."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession
    with SparkContext._lock:
        SparkContext._gateway = SparkContext._jvm = None
        SparkContext._active_spark_context = None
    SparkSession._instantiatedSession = SparkSession._activeSession = None


def _start(config: Config, archive: ArchivePlan | None, early: EarlyJvm | None = None):
    from pyspark import SparkConf, SparkContext

    submitted = dict(_submitted_conf().getAll())  # what spark-submit was given: it wins over the config file
    conf = SparkConf()  # as SparkSession.builder makes one: spark-submit's settings, then these
    for key, value in (early.settings if early else _launch_settings(config, submitted, archive)).items():
        conf.set(key, value)
    if early is not None:
        context = SparkContext(conf=conf, gateway=early.gateway())
    else:
        with contextlib.nullcontext() if _under_spark_submit() else launched_into_a_relay():
            context = SparkContext.getOrCreate(conf)
    context.setLogLevel("WARN")
    if archive is not None and archive.recording is not None:
        atexit.register(_record_at_exit, archive, context)
    log.debug("SparkContext started (Spark %s), master %s", context.version, context.master)
    return context


def _launch_settings(config: Config, submitted: Mapping[str, str], archive: ArchivePlan | None) -> dict[str, str]:
    """context_settings, and the environment the JVM reads when it starts (under `etl run`)."""
    # Executors must run this interpreter, or they will not find the etl package.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if _local_master(config, submitted):
        os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
    return context_settings(config, submitted, archive)


@dataclass(frozen=True)
class EarlyLaunch:
    """A driver JVM launched before it was needed (etl.hive.jvm_launch), and its class archive,
    whose checksum is read only once the JVM is needed."""
    jvm: EarlyJvm
    archive: ArchivePlan | None

    def archive_holds(self) -> bool:
        """Whether the archive the JVM maps is whole; if not, the archive is moved aside and the
        JVM killed, before anything ran on it."""
        if self.archive is None or self.archive.mapped is None or checksum_holds(self.archive.mapped):
            return True
        self.jvm.abandon()
        return False


def launch_early(config: Config) -> EarlyLaunch | None:
    """The driver JVM, launched now, with the settings the SparkContext will have (etl run, to
    boot while the run imports and plans: etl.hive.jvm_launch); None under spark-submit (the
    JVM is up) or when this process already runs one. pyspark is not imported here."""
    if _under_spark_submit() or _gateway_running():
        return None
    archive = _class_archive(config, verify=False)
    relay = started_relay()
    try:
        jvm = EarlyJvm(_launch_settings(config, {}, archive), relay.write_fd)
    finally:
        os.close(relay.write_fd)  # the JVM holds it now
    return EarlyLaunch(jvm, archive)


def context_settings(config: Config, submitted: Mapping[str, str], archive: ArchivePlan | None) -> dict[str, str]:
    """What the SparkContext is started with besides spark-submit's `submitted` settings: the
    [spark] section (a master spark-submit names wins), the driver JVM's options, a local
    master's defaults, the metastore's settings, and Hive as the catalog of any session made
    on it later."""
    settings = {"spark.app.name": f"etl-{config.job.name}", "spark.ui.showConsoleProgress": "false"}
    settings.update((k, v) for k, v in config.spark.items() if k != "spark.master" or k not in submitted)
    own = (config.jvm.quick_start_options(config.spark.get(DRIVER_JAVA_OPTIONS, "")),
           archive.java_options if archive else "")
    settings.update(_driver_java_options(config.spark, " ".join(part for part in own if part)))
    if "spark.master" not in submitted and "spark.master" not in config.spark:
        settings["spark.master"] = "local[*]"
    given = set(config.spark) | set(submitted)
    if _local_master(config, submitted):
        settings.update(local_master_settings(given))
    settings.update(hive_settings(config, given))
    settings[CATALOG_IMPLEMENTATION] = "hive"  # what enableHiveSupport() sets
    return settings


def _local_master(config: Config, submitted: Mapping[str, str]) -> bool:
    return (submitted.get("spark.master", None) or config.spark.get("spark.master", "local[*]")).startswith("local")


def hive_settings(config: Config, given: set[str]) -> dict[str, str]:
    """The session's metastore settings; `given`: the keys the [spark] section or spark-submit set.

    Hive's session switches hive.metastore.filter.hook to AuthorizationMetaStoreFilterHook on its
    first authorization check (the first partition lookup of a process). The switch closes the
    metastore client's connection under the call in flight, which fails and is retried after
    hive.metastore.client.connect.retry.delay: 1.1 s of each process's first registration. Set from the
    start, the switch changes nothing; a hook of the job's own is kept."""
    settings = {"spark.sql.warehouse.dir": config.warehouse.hive_root}  # Hive's view of it
    if config.hive.metastore != "embedded":
        settings["spark.hadoop.hive.metastore.uris"] = config.hive.metastore
    if METASTORE_FILTER_HOOK not in given:
        settings[METASTORE_FILTER_HOOK] = AUTHORIZATION_FILTER_HOOK
    return settings


def _driver_java_options(settings: dict[str, str], own_options: str) -> dict[str, str]:
    """Under `etl run` pyspark starts the driver JVM with these options: Spark's INFO lines stay
    off (DRIVER_LOG4J2), unless the [spark] options name a log4j config of their own, and
    `own_options` ([jvm]: its quick start and class archive). Under spark-submit the JVM is up
    before the job starts: --driver-java-options says it there."""
    if _under_spark_submit():
        return {}
    given = settings.get(DRIVER_JAVA_OPTIONS, "")
    log4j = "" if "log4j" in given else _log4j_options()
    options = " ".join(part for part in (given, log4j, own_options) if part)
    return {} if options == given else {DRIVER_JAVA_OPTIONS: options}


def _log4j_options() -> str:
    """DRIVER_LOG4J2, and with JSON logs the Spark line's JSON overlay over it (a log4j2 composite
    configuration): the driver JVM's lines are then JSON records naming the job (etl.logs)."""
    if logs.chosen_format() is not logs.LogFormat.JSON:
        return f"-Dlog4j2.configurationFile={DRIVER_LOG4J2.as_uri()}"
    job = logs.bound().get("job", "")
    overlay = DRIVER_LOG4J2.with_name(spark_line.current().driver_log4j2_json)
    return f"-Dlog4j2.configurationFile={DRIVER_LOG4J2.as_uri()},{overlay.as_uri()} -Detl.log.job={job}"


def _gateway_running() -> bool:
    """Whether pyspark runs a gateway in this process (not imported: it does not)."""
    if "pyspark" not in sys.modules:
        return False
    from pyspark import SparkContext
    return SparkContext._gateway is not None


def _class_archive(config: Config, verify: bool = True) -> ArchivePlan | None:
    """The class archive plan of a JVM this command launches (etl.hive.class_archive); None under
    spark-submit, when this process already runs a JVM, or with [jvm] class_archive = false. A
    cache that cannot be used is not the job's failure: it starts without one, and says why."""
    if not config.jvm.class_archive or _under_spark_submit() or _gateway_running():
        return None
    try:
        return plan_archive(config.jvm, config.spark, verify)
    except OSError as exc:
        log.warning("starting Spark without a class archive: %s", exc)
        return None


def _record_at_exit(archive: ArchivePlan, context) -> None:
    """Spark stops first: its accumulator server would otherwise see the JVM vanish, and say so
    with a traceback."""
    jvm_process = context._gateway.proc
    try:
        context.stop()
    finally:
        finish_recording(archive, jvm_process)


def satisfy_a_yarn_application_master() -> None:
    """In YARN cluster mode the driver runs inside the ApplicationMaster, which fails the
    application ("User did not initialize spark context!") when the driver exits 0 without having
    made a SparkContext, as a lock-held skip or a run with nothing new does: the scheduler would
    see a skipped run as FAILED. So such a run makes one, of the submitted settings, and stops it:
    the application then ends SUCCEEDED. Nothing happens outside YARN cluster mode, or when the
    command already made one."""
    if not _under_spark_submit():
        return
    from pyspark import SparkContext
    conf = _submitted_conf()
    if conf.get("spark.submit.deployMode", "client") != "cluster" \
            or not conf.get("spark.master", "").startswith("yarn"):
        return
    if SparkContext._active_spark_context is not None:
        return
    SparkContext.getOrCreate(conf).stop()


def _under_spark_submit() -> bool:
    return "PYSPARK_GATEWAY_PORT" in os.environ


def local_master_settings(given: set[str]) -> dict[str, str]:
    """A local master's defaults, each unless `given` (the keys the [spark] section or
    spark-submit set) has it: the driver listens on loopback only, not on the host's address
    (Spark's default), since a local master needs no network; and no web UI, since a local run is
    over within seconds, before anyone opens it, and Jetty's start was 0.25 s of it
    (docs/performance.md). `spark.ui.enabled = true` brings it back for a long backfill."""
    defaults = {"spark.driver.bindAddress": LOOPBACK, "spark.driver.host": LOOPBACK, "spark.ui.enabled": "false"}
    return {key: value for key, value in defaults.items() if key not in given}


def _submitted_conf():
    """The settings spark-submit was given (--master, --conf ...), or none under `etl run`.

    Under spark-submit the JVM is already up (it passes PYSPARK_GATEWAY_PORT), but SparkConf()
    reads it only once pyspark is connected to it; before that it is empty, and the job would
    run on local[*] whatever --master said. Under `etl run` nothing is connected yet, and must
    not be: the JVM is launched later, with the [spark] settings (driver memory, JVM options)."""
    from pyspark import SparkConf, SparkContext
    if not _under_spark_submit():
        return SparkConf(loadDefaults=False)
    SparkContext._ensure_initialized()  # connects to spark-submit's JVM; launches nothing
    return SparkConf()
