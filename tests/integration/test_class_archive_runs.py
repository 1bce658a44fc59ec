"""The driver JVM's class archive, with real JVMs: the first `etl run` on a host records one and
publishes it whole, the next maps it, and neither says a word of it on stdout (--json)."""
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


def test_the_first_run_records_a_class_archive_and_the_next_run_maps_it(spark, new_topic, produce, write_config,
                                                                        warehouse_dir, tmp_path):
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


# What HotSpot prints when it wrote its crash report (hs_err_pid<pid>.log).
JVM_REPORTED = "An error report file with more information is saved as"


def _damage(archive: Path, where: str, length: int = 4096) -> None:
    """Flip `length` bytes of the archive in place, at its start or at five points of its body
    (which of its classes the JVM touches at start varies): its size stays the same."""
    size = archive.stat().st_size
    with open(archive, "r+b") as handle:
        for at in [0] if where == "header" else [size * tenths // 10 for tenths in (1, 3, 5, 7, 9)]:
            handle.seek(at)
            chunk = handle.read(length)
            handle.seek(at)
            handle.write(bytes(b ^ 0xFF for b in chunk))
    assert archive.stat().st_size == size == int(archive.stem.split("-")[1])


def test_a_damaged_archive_is_moved_aside_and_every_next_run_succeeds_and_records_anew(
        spark, new_topic, produce, write_config, warehouse_dir, tmp_path):
    """A same-size archive with a damaged body crashed the driver JVM (SIGSEGV) on every run, and
    one with a damaged header was ignored by the JVM on every run: neither was ever recorded again.
    The checksum in the archive's name finds both before the JVM starts. A damaged body whose name
    was forged to match makes the JVM misbehave when it first uses a damaged class: should it die at
    start, the run starts it again without the archive; should it raise a LinkageError at start, or
    die later (a Hive call), that run fails having moved the archive aside, and the next succeeds.
    A damaged header is found by the same checksum before any JVM starts, as a damaged body is:
    tests/unit/test_class_archive.py checks both, and this test runs the body (one run the less)."""
    topic = new_topic(partitions=1)
    folder = tmp_path / "jvm-archive"
    config = write_config(kafka={"topics": topic}, jvm={"class_archive_dir": str(folder)})
    produce(topic, events_by_partition(1, 10))
    first = run_etl(config, "--json")
    assert first.returncode == 0, first.describe()
    loaded = 10
    for where in ("body", "body, under a forged checksum"):
        [archive] = folder.glob("*.jsa")
        _damage(archive, "body")
        said = f"{archive} is damaged"
        if where.endswith("checksum"):
            from etl.hive.class_archive import checksum
            archive = archive.rename(archive.with_name(f"{archive.name.rsplit('-', 1)[0]}-{checksum(archive)}.jsa"))
            said = f"{archive} made the driver JVM exit while it started"
        produce(topic, events_by_partition(1, 10, first_id=loaded))
        run = run_etl(config, "--json")
        told, reported = run.stderr, JVM_REPORTED in run.stdout + run.stderr  # HotSpot's banner goes to stdout
        if where.endswith("checksum") and run.returncode != 0:  # the JVM failed, or died after its start
            said = (f"{archive} made the driver JVM fail while it started",
                    f"{archive} made the driver JVM exit during")
            assert any(words in run.stderr for words in said) and "moved aside" in run.stderr, run.describe()
            assert not archive.exists() and list(folder.glob("*.corrupt")) == [Path(f"{archive}.corrupt")]
            run = run_etl(config, "--json")  # and the next one loads the records, without the archive
            said = ""
        assert run.returncode == 0, f"damaged {where}: " + run.describe()
        assert [c["records"] for c in _committed(run.stdout)] == [10], run.stdout  # the JVM's words: not here
        loaded += 10
        if said:  # this run moved the archive aside, and says so
            assert said in run.stderr and "moved aside" in run.stderr, f"damaged {where}: " + run.stderr[-3000:]
        assert not archive.exists() and list(folder.glob("*.corrupt")) == [Path(f"{archive}.corrupt")]
        if where.endswith("checksum") and f"{archive} made the driver JVM exit" in told and reported:
            # The JVM crashed and wrote its report: beside the archives, not in the job's folder. A JVM
            # that exited at start without crashing (it refused the archive) writes none, nor says so.
            assert list(folder.glob("hs_err_pid*.log")), (list(folder.iterdir()), told[-3000:])
        [recorded] = folder.glob("*.jsa")  # this run recorded a whole one again
        assert "class archive ready" in run.stderr and recorded.stat().st_size > 10_000_000
    check_exactly_once(hive_reader(spark), config, expected_offsets(topic, {0: loaded}), warehouse_dir)
