"""Apache Flink as a second peer: what a Flink user writes to get Kafka into Hive-style Parquet
folders (tests/perf/flink/src/main/java/etl/bench/flink/KafkaToParquet.java), run as its own
process, a local MiniCluster in one JVM with a small heap.

The job: KafkaSource from the earliest offsets (bounded at the latest offsets at its start for the
side-by-side bench, so that it ends; unbounded for the crash comparison), flink-json's parser into
the columns of warehouse_schema/events.sql plus Kafka's topic, partition, offset and timestamp, a
FileSink of bulk Parquet (RowData through flink-parquet's ParquetRowDataBuilder: the type Flink's
own Table/SQL file sink writes, with no Avro schema to keep beside the table's; timestamps as
INT96, which Hive and Spark read as TIMESTAMP; snappy), in dt=YYYY-MM-DD/hour=HH folders of the
Kafka timestamp (UTC), exactly-once checkpoints every CHECKPOINT_INTERVAL_MS, retained, and a
run restores from the newest retained checkpoint. Finished files are `part-<uuid>-<subtask>-<n>
.snappy.parquet`; in-progress and pending ones are hidden (`.part-...inprogress.<uuid>`).

Its jars come from tests/perf/flink/pom.xml (Maven Central) into .stack/jars/flink, fetched only
by `scripts/setup --bench`; the Java file is compiled with javac into .stack/flink-job/classes,
again only when the source or the jars changed (`python -m tests.perf.flink_peer compile`).
Without the jars the bench says so and skips Flink's row. Nothing here is part of etl/.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOURCE_DIR = REPO / "tests" / "perf" / "flink"
JAVA_SOURCE = SOURCE_DIR / "src" / "main" / "java" / "etl" / "bench" / "flink" / "KafkaToParquet.java"
LOG_CONFIG = SOURCE_DIR / "log4j2.properties"
JARS = REPO / ".stack" / "jars" / "flink"
BUILD = REPO / ".stack" / "flink-job"
CLASSES = BUILD / "classes"
MAIN_CLASS = "etl.bench.flink.KafkaToParquet"
HEAP = "768m"  # the MiniCluster's one JVM (JobManager and TaskManager); its network and managed memory are off-heap
# Flink's docs tie the interval to the delivery SLA and to how much may be read again after a
# failure (docs/ops/production_ready: "Choose The Right Checkpoint Interval"); the FileSink makes
# files visible only at a completed checkpoint. 10 s keeps both within the runs measured here.
CHECKPOINT_INTERVAL_MS = 10_000
# What Flink's own launcher (flink-dist's config.yaml, env.java.opts.all) opens on Java 17.
JAVA_OPENS = [f"--add-opens=java.base/{pkg}=ALL-UNNAMED" for pkg in (
    "java.lang", "java.net", "java.io", "java.nio", "sun.nio.ch", "java.lang.reflect", "java.text", "java.time",
    "java.util", "java.util.concurrent", "java.util.concurrent.atomic", "java.util.concurrent.locks")]


def unavailable() -> str | None:
    """Why the Flink peer cannot run here, or None."""
    if not (JARS / ".stamp").is_file():
        return f"no Flink jars in {JARS.relative_to(REPO)} (scripts/setup --bench fetches them)"
    if shutil.which("javac") is None or shutil.which("java") is None:
        return "no javac/java on PATH (a JDK 17 is needed to compile and run the Flink job)"
    return None


def _wanted_stamp() -> str:
    digest = hashlib.sha256(JAVA_SOURCE.read_bytes())
    digest.update((JARS / ".stamp").read_bytes())
    return digest.hexdigest()


def compile_job() -> Path:
    """javac the one Java file against the jars into CLASSES, unless its stamp says it is current."""
    stamp = BUILD / ".stamp"
    want = _wanted_stamp()
    if stamp.is_file() and stamp.read_text().strip() == want and any(CLASSES.rglob("*.class")):
        return CLASSES
    shutil.rmtree(CLASSES, ignore_errors=True)
    CLASSES.mkdir(parents=True)
    done = subprocess.run(["javac", "-J-Xmx512m", "-nowarn", "-d", str(CLASSES), "-cp", f"{JARS}/*",
                           str(JAVA_SOURCE)], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"javac {JAVA_SOURCE.name} failed:\n{done.stderr[-3000:]}")
    stamp.write_text(want + "\n")
    return CLASSES


def job_command(bootstrap: str, topic: str, output: Path, checkpoints: Path, *, bounded: bool, parallelism: int = 2,
                interval_ms: int = CHECKPOINT_INTERVAL_MS, heap: str = HEAP) -> list[str]:
    """The Flink job as a process: `java` with its classpath, small heap and log settings."""
    return ["java", f"-Xms{heap}", f"-Xmx{heap}", *JAVA_OPENS, f"-Dlog4j.configurationFile={LOG_CONFIG}",
            "-cp", f"{CLASSES}:{JARS}/*", MAIN_CLASS, "--bootstrap", bootstrap, "--topic", topic,
            "--output", str(output), "--checkpoints", str(checkpoints), "--parallelism", str(parallelism),
            "--checkpoint-interval-ms", str(interval_ms), *(["--bounded"] if bounded else [])]


def said(stdout: str) -> list[dict]:
    """The job's JSON lines ({"event": "started" | "first_record" | "finished", ...})."""
    lines = []
    for line in stdout.splitlines():
        if line.startswith("{"):
            try:
                lines.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return lines


def event(stdout: str, name: str) -> dict | None:
    """The job's last JSON line of that event, or None."""
    found = [line for line in said(stdout) if line.get("event") == name]
    return found[-1] if found else None


def hidden_files(folder: Path) -> dict:
    """The FileSink's hidden files under `folder` (`.part-*`: in progress, or pending a
    checkpoint's commit), split by whether they already end in Parquet's footer magic (a
    closed, pending file) or not (one still open, or cut short by a kill), with their bytes."""
    found = {"in_progress": 0, "complete_pending": 0, "bytes": 0}
    if not folder.exists():
        return found
    for path in folder.rglob(".part-*"):
        if not path.is_file() or path.name.endswith(".crc"):
            continue
        size = path.stat().st_size
        found["bytes"] += size
        with open(path, "rb") as f:
            if size >= 8:
                f.seek(size - 4)
            complete = size >= 8 and f.read(4) == b"PAR1"
        found["complete_pending" if complete else "in_progress"] += 1
    return found


def main(argv: list[str]) -> int:
    """`python -m tests.perf.flink_peer compile`: what scripts/setup --bench runs after the fetch."""
    if argv != ["compile"]:
        print("usage: python -m tests.perf.flink_peer compile", file=sys.stderr)
        return 2
    reason = unavailable()
    if reason:
        print(f"flink peer: {reason}", file=sys.stderr)
        return 1
    print(f"flink peer: compiled into {compile_job().relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
