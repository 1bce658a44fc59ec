"""The driver JVM's class archive, with real JVMs: the first `etl run` on a host records one and
publishes it whole, the next maps it, and neither says a word of it on stdout (--json); one whose
body was damaged is moved aside before the JVM starts, and the run records a whole one again."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.harness.data import events_by_partition
from tests.harness.etl_process import EtlProcess, run_etl
from tests.harness.oracle import check_exactly_once, expected_offsets, hive_reader

pytestmark = pytest.mark.slow


def _committed(stdout: str) -> list[dict]:
    lines = [line for line in stdout.splitlines() if line.strip()]
    assert all(line.startswith("{") for line in lines), stdout  # nothing but the job's JSON
    return [record for record in map(json.loads, lines) if record["event"] == "committed"]


def _mapped_by_the_jvm(run: EtlProcess, archive: Path, timeout: float = 300) -> bool:
    """Whether the run's JVM maps `archive` (its /proc maps), looked at while the run lasts."""
    deadline = time.monotonic() + timeout
    while run.poll() is None and time.monotonic() < deadline:
        for pid in run.descendants_matching("SparkSubmit"):
            try:
                if str(archive) in Path(f"/proc/{pid}/maps").read_text():
                    return True
            except OSError:
                pass
        time.sleep(0.2)
    return False


def _damage(archive: Path, length: int = 4096) -> None:
    """Flip `length` bytes at five points of the archive's body (which of its classes the JVM
    touches at start varies), in place: its size stays the same."""
    size = archive.stat().st_size
    with open(archive, "r+b") as handle:
        for at in [size * tenths // 10 for tenths in (1, 3, 5, 7, 9)]:
            handle.seek(at)
            chunk = handle.read(length)
            handle.seek(at)
            handle.write(bytes(b ^ 0xFF for b in chunk))
    assert archive.stat().st_size == size == int(archive.stem.split("-")[1])


def test_the_first_run_records_a_class_archive_the_next_maps_it_and_a_damaged_one_is_moved_aside(
        spark, new_topic, produce, write_config, warehouse_dir, tmp_path):
    """The archive the first run records is mapped by the next; then its body is damaged (same
    size). A same-size archive with a damaged body crashed the driver JVM (SIGSEGV) on every run,
    and one with a damaged header was ignored by the JVM on every run: neither was ever recorded
    again. The checksum in the archive's name finds both before the JVM starts; the next run moves
    it aside, loads, and records a whole one again. A damaged header is found by the same checksum
    as a damaged body is: tests/unit/test_class_archive.py checks both, and this test runs the
    body. A damaged body under a name forged to match is not run: what a JVM does on it is
    undefined (it crashed, raised a LinkageError, or hung with no task left to run;
    docs/testing.md). One test, one archive recorded (about 30 s a recording)."""
    topic = new_topic(partitions=2)
    produce(topic, events_by_partition(2, 40))
    folder = tmp_path / "jvm-archive"
    config = write_config(kafka={"topics": topic}, jvm={"class_archive_dir": str(folder)})

    first = run_etl(config, "--json", reap_now=True)  # its orphans counted here, not in the background
    assert first.returncode == 0, first.describe()
    assert [c["records"] for c in _committed(first.stdout)] == [80]
    [archive] = folder.glob("*.jsa")
    from etl.hive.class_archive import checksum
    _, size, crc32 = archive.stem.split("-")  # <key>-<size>-<crc32>.jsa, checked before each mapping
    assert archive.stat().st_size == int(size) > 10_000_000 and checksum(archive) == crc32, archive
    assert list(folder.glob("*.partial")) == [] and "class archive ready" in first.stderr
    assert first.orphans_killed == []  # the run waited for its JVM to write the archive

    produce(topic, events_by_partition(2, 40, first_id=80))
    second = EtlProcess(config, "run", "--json")
    mapped = _mapped_by_the_jvm(second, archive)
    assert second.wait(600) == 0, second.describe()
    assert mapped, f"the JVM did not map {archive}"
    assert [c["records"] for c in _committed(second.stdout)] == [80]
    assert "recording" not in second.stderr and list(folder.glob("*.jsa")) == [archive]
    second.reap()
    second.close()
    check_exactly_once(hive_reader(spark), config, expected_offsets(topic, {0: 80, 1: 80}), warehouse_dir)

    _damage(archive)
    produce(topic, {0: events_by_partition(1, 10, first_id=160)[0]})
    run = run_etl(config, "--json")
    assert run.returncode == 0, run.describe()
    assert [c["records"] for c in _committed(run.stdout)] == [10], run.stdout  # the JVM's words: not here
    assert f"{archive} is damaged" in run.stderr and "moved aside" in run.stderr, run.stderr[-3000:]
    assert not archive.exists() and list(folder.glob("*.corrupt")) == [Path(f"{archive}.corrupt")]
    [recorded] = folder.glob("*.jsa")  # this run recorded a whole one again
    assert "class archive ready" in run.stderr and recorded.stat().st_size > 10_000_000
    check_exactly_once(hive_reader(spark), config, expected_offsets(topic, {0: 90, 1: 80}), warehouse_dir)
