"""The registry a run publishes (etl.ops.metrics), without the stack: what each outcome
carries, and that ZooKeeper being down costs one WARNING and the metrics that need it only."""
import logging
import re

import pytest
from prometheus_client.parser import text_string_to_metric_families

from etl.config import load_config
from etl.errors import ConfigError
from etl.job.observer import Phase
from etl.model.batch import Batch, BatchState, OffsetRange
from etl.ops.metrics import COUNTERS, FAILURE, LOCK_HELD, RunMetrics, build_registry, etl_version, published_metrics
from etl.state.store import ZooKeeperUnavailable
from tests.harness.config_file import minimal_ini
from tests.harness.paths import EVENTS_SCHEMA, REPO
from tests.harness.ports import free_port


@pytest.fixture
def metrics(tmp_path):
    """A job whose ZooKeeper is a closed port (connecting fails within a second)."""
    ini = minimal_ini(EVENTS_SCHEMA, sections=f"[metrics]\ntextfile = {tmp_path}/etl_j1.prom\n")
    ini = ini.replace("hosts = 127.0.0.1:2181", f"hosts = 127.0.0.1:{free_port()}\nsession_timeout_seconds = 1")
    path = tmp_path / "job.ini"
    path.write_text(ini)
    return RunMetrics(load_config(path))


def samples(registry) -> dict[str, dict]:
    return {s.name: s.labels | {"value": s.value} for f in registry.collect() for s in f.samples}


def test_a_lock_held_run_publishes_its_time_only(metrics):
    metrics.lock_held()
    assert list(samples(build_registry(metrics, LOCK_HELD, 0))) == ["etl_build_info",
                                                                    "etl_last_lock_held_timestamp_seconds"]


def test_without_reading_the_state_nothing_is_tried(metrics, caplog):
    metrics.phase_done(Phase.SETUP, 0.5)
    with caplog.at_level(logging.WARNING):
        published = samples(build_registry(metrics, FAILURE, 2, read_state=False))
    assert not caplog.records  # ZooKeeper was not even tried
    assert published["etl_last_run_exit_code"]["value"] == 2 and "etl_last_failure_timestamp_seconds" in published
    assert "etl_last_success_timestamp_seconds" not in published
    assert published["etl_run_rows"] == {"etl_job": "j1", "table": "db.t", "value": 0.0}


def test_zookeeper_down_is_one_warning_and_leaves_out_what_needs_it(metrics, caplog):
    with caplog.at_level(logging.WARNING, logger="etl.ops.metrics"):
        published = samples(build_registry(metrics, FAILURE, 75))
    ours = [r for r in caplog.records if r.name.startswith("etl.")]
    assert len(ours) == 1 and ours[0].levelname == "WARNING" and "ZooKeeper not read" in ours[0].getMessage()
    assert published["etl_last_run_exit_code"]["value"] == 75
    assert not {"etl_lag_records", "etl_committed_offset", "etl_open_batch_age_seconds",
                "etl_run_written_bytes", "etl_rows_total"} & set(published)


@pytest.mark.parametrize("error, code", [(ConfigError("bad column"), 2), (ZooKeeperUnavailable("zk down"), 75)])
def test_a_run_failing_on_its_config_or_zookeeper_publishes_without_reading_zookeeper_again(
        metrics, caplog, error, code):
    with caplog.at_level(logging.WARNING), pytest.raises(type(error)):
        with published_metrics(metrics.config):
            raise error
    assert not caplog.records
    published = {s.name: s.value for f in text_string_to_metric_families(metrics.config.metrics.textfile.read_text())
                 for s in f.samples}
    assert published["etl_last_run_exit_code"] == code and "etl_lag_records" not in published


def test_a_success_is_published_with_its_time(metrics, caplog):
    with caplog.at_level(logging.WARNING, logger="etl.ops.metrics"):
        with published_metrics(metrics.config) as observer:
            observer.phase_done(Phase.TASKS, 2.0)
    text = metrics.config.metrics.textfile.read_text()
    published = {(s.name, s.labels.get("phase")): s.value for f in text_string_to_metric_families(text)
                 for s in f.samples}
    assert published[("etl_last_run_exit_code", None)] == 0
    assert ("etl_last_success_timestamp_seconds", None) in published
    assert published[("etl_run_phase_seconds", "tasks")] == 2.0
    assert [r.getMessage() for r in caplog.records if r.name == "etl.ops.metrics"][0].startswith(
        "metrics: ZooKeeper not read")  # this job's ZooKeeper is a closed port


def test_every_series_names_its_etl_job_in_etl_job_never_in_job(metrics):
    """`job` is Prometheus's own target label: node_exporter's scrape would rename it exported_job
    and report every ETL job on the host as job="node" (docs/monitoring.md)."""
    for outcome in (FAILURE, LOCK_HELD):
        for family in build_registry(metrics, outcome, 1, read_state=False).collect():
            for sample in family.samples:
                assert sample.labels.get("etl_job") == "j1" and "job" not in sample.labels, sample


def test_the_build_info_names_the_version(metrics):
    published = samples(build_registry(metrics, FAILURE, 1, read_state=False))
    assert published["etl_build_info"] == {"etl_job": "j1", "version": etl_version(), "value": 1.0}
    metrics.lock_held()
    assert "etl_build_info" in samples(build_registry(metrics, LOCK_HELD, 0))


def test_every_metric_name_ends_in_its_unit_and_is_documented():
    """Prometheus's naming: the unit (seconds, bytes, rows, records, files...) last, `_total` for
    counters only; and docs/monitoring.md lists every name the code publishes."""
    source = (REPO / "etl" / "ops" / "metrics.py").read_text()
    names = set(re.findall(r'"(etl_[a-z_]+)"', source))
    assert {"etl_run_written_bytes", "etl_run_written_files", "etl_build_info", "etl_rows"} <= names
    assert not {"etl_run_bytes_written", "etl_run_files_written"} & names
    documented = set(re.findall(r"^\| `(etl_[a-z_]+)` \| (?:gauge|counter) \|",
                                (REPO / "docs" / "monitoring.md").read_text(), re.M))
    exported = {name + "_total" if name in COUNTERS else name for name in names}
    assert exported == documented


class _BrokenWarehouse:
    def main_dir(self, partition):
        raise RuntimeError("a bug in the listing")

    rejected_dir = main_dir


def test_a_listing_that_fails_before_a_commit_costs_its_bytes_not_the_commit(metrics, caplog):
    batch = Batch(batch_id=7, state=BatchState.REGISTERED, planned_at="2026-11-25T10:00:00+00:00",
                  partition_values={"dt": "2026-11-25"}, ranges=(OffsetRange("t", 0, 0, 60, 0),))
    with caplog.at_level(logging.WARNING, logger="etl.ops.metrics"):
        assert metrics.written_bytes(batch, _BrokenWarehouse()) is None
    [record] = caplog.records
    assert "batch 7's files not read, so not counted: RuntimeError: a bug in the listing" in record.getMessage()


def test_the_phase_timeline_passes_every_hook_on_and_places_each_phase_on_the_monotonic_clock(monkeypatch):
    from etl.job import observer
    from etl.job.observer import PhaseTimeline
    monkeypatch.setattr(observer.time, "monotonic", lambda: 100.0)  # a clock that a loaded machine cannot move
    inner = PhaseTimeline()
    timeline = PhaseTimeline(inner)
    timeline.phase_done(Phase.SPARK, 0.25)
    timeline.phase_done(Phase.TASKS, 1.0)
    timeline.phase_done(Phase.TASKS, 0.5)
    report = timeline.report()
    assert report["seconds"] == {"spark": 0.25, "tasks": 1.5} and inner.report()["seconds"] == report["seconds"]
    (name, started, seconds), *_ = report["timeline"]
    assert (name, started, seconds) == ("spark", 99.75, 0.25)  # it ended now, so it started 0.25 s before
