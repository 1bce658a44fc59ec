"""[jvm]: the driver JVM that `etl run` (and every command that needs Spark) launches itself.

Spark's start-up in a fresh process is mostly the JVM loading and verifying some 20,000
classes from jar files. A class archive (the JDK's class data sharing, JEP 350) holds them
ready to map: the first command that starts Spark on a host records the classes its JVM
loaded into one, and later commands map it (etl.hive.class_archive). Under spark-submit the
JVM is up before the job starts, so nothing here applies there.

The same JVM starts with C1 alone and the serial collector (quick_start): a driver plans and
coordinates while Python workers write the rows, so C2's and G1's threads only compete with
Spark's start and the Hive client's for the cores (1.4 s of a 2-core start, docs/performance.md).
Parsed in etl.config.parse (the Section type lives above this module's floor in the package).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping


QUICK_START_JIT = "-XX:TieredStopAtLevel=1"
QUICK_START_GC = "-XX:+UseSerialGC"
_CHOSEN_JIT = re.compile(r"-XX:(?:TieredStopAtLevel=|[+-]TieredCompilation\b)")
_CHOSEN_GC = re.compile(r"-XX:\+Use\w+GC\b")


@dataclass(frozen=True)
class JvmConfig:
    class_archive: bool = True  # record the classes once, then map them at every start
    class_archive_dir: Path | None = None  # None: default_archive_dir()
    quick_start: bool = True  # C1 only and the serial collector, unless the driver's options choose

    def quick_start_options(self, given: str) -> str:
        """The JIT and collector options the JVM gets besides `given` (spark.driver.extraJavaOptions):
        each one `given` does not choose itself, none without quick_start."""
        if not self.quick_start:
            return ""
        return " ".join(option for option, chosen in ((QUICK_START_JIT, _CHOSEN_JIT), (QUICK_START_GC, _CHOSEN_GC))
                        if not chosen.search(given))


def default_archive_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """$XDG_CACHE_HOME/kafka-hive-etl/jvm, else ~/.cache/kafka-hive-etl/jvm: a cache, per user."""
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kafka-hive-etl" / "jvm"


def jvm_section(s) -> JvmConfig:
    """`s`: the [jvm] etl.config.section.Section."""
    config = JvmConfig(
        class_archive=s.get("class_archive"),
        class_archive_dir=s.get("class_archive_dir", None, _absolute_dir),
        quick_start=s.get("quick_start"),
    )
    s.reject_unknown()
    return config


def _absolute_dir(raw: str) -> Path:
    path = Path(raw)
    if not path.is_absolute():
        raise ValueError("must be an absolute path (a folder the job's user can write; it is created if missing)")
    return path
