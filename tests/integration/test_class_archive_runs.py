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

    first = run_etl(config, "--json")
    assert first.returncode == 0, first.describe()
    assert [c["records"] for c in _committed(first.stdout)] == [80]
    [archive] = folder.glob("*.jsa")
    assert archive.stat().st_size == int(archive.stem.rsplit("-", 1)[1]) > 10_000_000, archive
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
