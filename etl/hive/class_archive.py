"""A class archive for the driver JVM that pyspark launches: the JDK's class data sharing.

A fresh `etl run` spent about 7 s starting Spark, most of it the JVM loading, verifying and
linking classes from Spark's jar files. The JDK can record the classes a JVM loaded into an
archive when it exits (-XX:ArchiveClassesAtExit) and map that archive when the next JVM
starts (-XX:SharedArchiveFile); the same session then starts about 3 s sooner.

The first command on a host that starts Spark records one: its JVM runs slower, and when the
command ends it waits while the JVM writes the archive (about 170 MB, 15-30 s, once). The
archive is written under a name of its own and published by a hard link only after the JVM
exited cleanly, with its size and the CRC-32 of its bytes in its name. The JVM crashes
(SIGSEGV) on an archive whose body is damaged and ignores one whose header is, so before each
mapping both are checked (CRC-32 of 167 MB: 0.06-0.14 s; sha256 took 0.11, blake2b 0.21): an
archive that fails is moved aside (`.corrupt`, one kept for inspection), said in a warning,
and the command starts without it and records a new one. Should a JVM still die while starting
with an archive, etl.hive.spark moves it aside the same way and starts again without it: a
cache never fails a command twice.
One process records at a time (a file lock); the others start without an archive meanwhile.
The archive's name is a hash of what it depends on (the java binary, Spark's jars, the [spark]
spark.driver.* settings); should the JVM still refuse it, the JVM starts as it would without
one (-Xshare:auto).
"""
from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import shutil
import subprocess
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from etl.config.jvm import JvmConfig, default_archive_dir
from etl.hive.jvm_launch import spark_home

log = logging.getLogger(__name__)

# What the JVM would say about the archive (a class it skips, an archive it cannot map) goes to
# its stdout, which is the job's own (--json). A refused archive is not an error: it runs without.
QUIET = "-Xlog:cds*=off"
SUFFIX = ".jsa"
QUARANTINED = ".corrupt"  # a damaged archive moved aside: SUFFIX + QUARANTINED
CRASH_REPORT = "hs_err_pid%p.log"  # the JVM's own name for its crash report, kept beside the archives
CHUNK_BYTES = 1 << 20
STALE_DAYS = 14  # an archive no command mapped for this long is deleted when another is published
WRITE_TIMEOUT_SECONDS = 300


@dataclass(frozen=True)
class ArchivePlan:
    """What the driver JVM is started with, and, when it records an archive, where and under which lock."""
    java_options: str
    directory: Path
    key: str
    recording: Path | None = None  # the file this JVM writes when it exits
    lock_fd: int | None = None
    mapped: Path | None = None  # the archive this JVM maps


def plan_archive(jvm: JvmConfig, spark_settings: Mapping[str, str], verify: bool = True) -> ArchivePlan | None:
    """Map the archive if there is a whole one, else record one if no other process does; None
    when another process is recording (this JVM starts as it always did). `verify` False: its
    checksum is left to `checksum_holds`, before anything runs on the JVM (a JVM launched
    early: reading 160 MB is 0.07 s of a run that may need no JVM)."""
    directory = jvm.class_archive_dir or default_archive_dir()
    directory.mkdir(parents=True, exist_ok=True)
    key = archive_key(spark_settings, jvm)
    found = _whole_archive(directory, key, verify)
    if found is not None:
        os.utime(found)  # mapped today: not stale
        # Should the JVM crash on it all the same, its hs_err report goes beside the archives, not
        # into the command's current folder.
        crash_report = f"-XX:ErrorFile={directory / CRASH_REPORT}"
        return ArchivePlan(f"-XX:SharedArchiveFile={found} {QUIET} {crash_report}", directory, key, mapped=found)
    lock_fd = _try_lock(directory / f"{key}.lock")
    if lock_fd is None:
        log.debug("another process is recording the JVM's class archive; starting without one")
        return None
    for leftover in directory.glob(f"{key}.*.partial"):  # from a process killed while it recorded
        leftover.unlink(missing_ok=True)
    recording = directory / f"{key}.{os.getpid()}.partial"
    log.info("recording the driver JVM's classes into a class archive in %s: once per host and Spark version, "
             "this command starts Spark more slowly and waits 15-30 s at its end while the JVM writes it", directory)
    return ArchivePlan(f"-XX:ArchiveClassesAtExit={recording} {QUIET}", directory, key, recording, lock_fd)


def archive_key(spark_settings: Mapping[str, str], jvm: JvmConfig) -> str:
    """A hash of what an archive is valid for: the java binary, Spark's jars (names, sizes,
    times) and the driver's settings (heap size and JVM options decide the archive's layout),
    with the options [jvm] adds to them."""
    digest = hashlib.sha256()
    java = _java_binary()
    digest.update(f"{java}:{_stamp(java)}\n".encode())
    for jar in sorted(Path(spark_home(), "jars").glob("*.jar")):
        digest.update(f"{jar.name}:{_stamp(jar)}\n".encode())
    for key, value in sorted(spark_settings.items()):
        if key.startswith("spark.driver."):
            digest.update(f"{key}={value}\n".encode())
    digest.update(jvm.quick_start_options(spark_settings.get("spark.driver.extraJavaOptions", "")).encode())
    return digest.hexdigest()[:24]


def finish_recording(plan: ArchivePlan, jvm_process: subprocess.Popen) -> Path | None:
    """At the command's end: end the JVM as a Python exit would (EOF on its stdin), wait while
    it writes the archive, and publish it only if the JVM exited cleanly."""
    assert plan.recording is not None and plan.lock_fd is not None
    started = time.monotonic()
    try:
        if jvm_process.stdin is not None:
            jvm_process.stdin.close()
        code = jvm_process.wait(WRITE_TIMEOUT_SECONDS)
        return _publish(plan, code, time.monotonic() - started)
    except subprocess.TimeoutExpired:
        jvm_process.kill()
        log.warning("the JVM did not write its class archive within %d s; the next command tries again",
                    WRITE_TIMEOUT_SECONDS)
        return None
    except OSError as exc:  # the command's work is done: a cache that cannot be kept is said, not raised
        log.warning("the class archive could not be kept (%s); the next command tries again", exc)
        return None
    finally:
        plan.recording.unlink(missing_ok=True)
        os.close(plan.lock_fd)


def _publish(plan: ArchivePlan, exit_code: int, seconds: float) -> Path | None:
    size = plan.recording.stat().st_size if plan.recording.exists() else 0
    if exit_code != 0 or size == 0:
        log.warning("the JVM exited %s with a %d-byte class archive; not kept, the next command tries again",
                    exit_code, size)
        return None
    final = plan.directory / f"{plan.key}-{size}-{checksum(plan.recording)}{SUFFIX}"
    try:
        os.link(plan.recording, final)  # never replaces: an archive a JVM maps must not change under it
    except FileExistsError:
        pass
    log.info("class archive ready: %s (%.0f MB, written in %.1f s)", final, size / 1e6, seconds)
    _prune(plan.directory, keep=final)
    return final


def _whole_archive(directory: Path, key: str, verify: bool = True) -> Path | None:
    """The archive for `key` whose size and checksum (unless not `verify`) are the ones in its
    name. A damaged one is moved aside; one published before archives carried a checksum is
    deleted."""
    for candidate in sorted(directory.glob(f"{key}-*{SUFFIX}")):
        recorded = candidate.name[len(key) + 1:-len(SUFFIX)].split("-")
        if len(recorded) != 2 or not recorded[0].isdigit():
            log.info("deleting class archive %s: it carries no checksum (an earlier version wrote it)", candidate)
            candidate.unlink(missing_ok=True)
            continue
        size = candidate.stat().st_size
        if size != int(recorded[0]):
            quarantine(candidate, f"is damaged ({size} bytes, written with {recorded[0]})")
        elif not verify or checksum_holds(candidate):
            return candidate
    return None


def checksum_holds(archive: Path) -> bool:
    """Whether the archive's bytes are the ones written (the checksum in its name); a damaged one
    is moved aside."""
    if checksum(archive) == archive.name[:-len(SUFFIX)].rsplit("-", 1)[-1]:
        return True
    quarantine(archive, "is damaged (its bytes differ from the ones written: the checksum in its name does not "
                        "match)")
    return False


def checksum(path: Path) -> str:
    """The CRC-32 of the file, in hex: it tells a damaged archive, at about 3 GB/s (a forged one
    needs write access to the cache folder, which can as well replace the java binary)."""
    crc = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK_BYTES):
            crc = zlib.crc32(chunk, crc)
    return f"{crc:08x}"


def quarantine(archive: Path, why: str) -> None:
    """Move a damaged archive aside, where no JVM maps it and an operator may look at it; only
    the latest one is kept (each is about 170 MB). `why` completes "the class archive <path> "."""
    aside = archive.with_name(archive.name + QUARANTINED)
    for earlier in archive.parent.glob(f"*{SUFFIX}{QUARANTINED}"):
        if earlier != aside:
            earlier.unlink(missing_ok=True)
    try:
        os.replace(archive, aside)
    except FileNotFoundError:  # another command moved it aside first
        return
    log.warning("the class archive %s %s; moved aside to %s, which may be deleted. This command starts Spark "
                "without it, and a whole one is recorded again", archive, why, aside)


def _prune(directory: Path, keep: Path) -> None:
    cutoff = time.time() - STALE_DAYS * 86400
    for archive in directory.glob(f"*{SUFFIX}"):
        if archive != keep and archive.stat().st_mtime < cutoff:
            log.info("deleting class archive %s: no command mapped it for %d days", archive, STALE_DAYS)
            archive.unlink(missing_ok=True)
    for report in directory.glob(CRASH_REPORT.replace("%p", "*")):
        if report.stat().st_mtime < cutoff:
            report.unlink(missing_ok=True)


def _try_lock(path: Path) -> int | None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _java_binary() -> str:
    """The java that Spark's launcher runs: $JAVA_HOME/bin/java, else the first on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return os.path.realpath(found) if found else "java"


def _stamp(path: str | Path) -> str:
    try:
        stat = os.stat(path)
    except OSError:
        return "missing"
    return f"{stat.st_size}:{stat.st_mtime_ns}"
