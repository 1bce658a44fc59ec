"""[metrics] against a real Prometheus, Pushgateway and node_exporter (tests.harness.prometheus,
which runs deploy/prometheus/prometheus.yml): `etl run` pushes, or writes its textfile, Prometheus
scrapes the gateway or node_exporter, and PromQL answers with the batch's rows and lag, under
the ETL job's label etl_job. Also: the load totals count a batch once across crashes, a gateway
that does not answer leaves the run's exit code alone, and the textfile."""
from __future__ import annotations

import json

import pytest
from prometheus_client.parser import text_string_to_metric_families

from etl.config import load_config
from etl.state.store import ZkStateStore
from tests.harness.data import event, events_by_partition
from tests.harness.etl_process import run_etl
from etl.ops.metrics import etl_version
from tests.harness.prometheus import PrometheusStack, free_port, missing_binaries
from tests.harness.state import wait_for_lock_release

pytestmark = pytest.mark.skipif(bool(missing_binaries()), reason=f"not installed: {missing_binaries()} "
                                                                 f"(scripts/setup --tests installs them)")


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    with PrometheusStack(tmp_path_factory.mktemp("prometheus")) as stack:
        yield stack


def values(answer: dict) -> dict[tuple, float]:
    """{(label values but __name__, the target's and the ETL job's): value} of an instant query's answer."""
    return {tuple(v for k, v in sorted(r["metric"].items()) if k not in ("__name__", "job", "instance", "etl_job")):
            float(r["value"][1]) for r in answer["data"]["result"]}


@pytest.mark.slow
def test_a_batch_rows_and_lag_reach_prometheus_through_the_pushgateway(prometheus, new_topic, produce, write_config):
    topic = new_topic(partitions=3)
    produce(topic, events_by_partition(3, 40))  # N = 120
    config = write_config(kafka={"topics": topic}, metrics={"pushgateway": prometheus.gateway_url})
    job = load_config(config).job.name
    result = run_etl(config)
    assert result.returncode == 0, result.describe()
    assert "metrics not pushed" not in result.stderr

    rows_query = f'sum(etl_run_rows{{etl_job="{job}"}})'
    rows = prometheus.wait_for(rows_query)
    lag_query = f'etl_lag_records{{etl_job="{job}"}}'
    lag = prometheus.wait_for(lag_query)
    print(f"\nPromQL {rows_query} -> {json.dumps(rows)}\nPromQL {lag_query} -> {json.dumps(lag)}")
    assert values(rows) == {(): 120.0}
    assert values(lag) == {(str(p), topic): 0.0 for p in range(3)}
    offsets = prometheus.wait_for(f'etl_committed_offset{{etl_job="{job}"}}')
    assert values(offsets) == {(str(p), topic): 40.0 for p in range(3)}
    table = values(prometheus.wait_for(f'etl_run_written_files{{etl_job="{job}"}}'))
    assert list(table.values()) == [3.0]
    assert values(prometheus.wait_for(f'etl_run_written_bytes{{etl_job="{job}"}} > 0'))
    assert values(prometheus.wait_for(f'etl_open_batch_age_seconds{{etl_job="{job}"}}')) == {(): 0.0}
    assert values(prometheus.wait_for(f'etl_run_phase_seconds{{etl_job="{job}", phase="tasks"}} > 0'))
    assert values(prometheus.wait_for(f'time() - etl_last_success_timestamp_seconds{{etl_job="{job}"}} < 600'))
    assert values(prometheus.wait_for(f'etl_rows_total{{etl_job="{job}"}}')) == {(): 120.0}
    assert values(prometheus.wait_for(f'etl_build_info{{etl_job="{job}"}}')) == {(etl_version(),): 1.0}


@pytest.mark.slow
def test_a_failed_run_pushes_its_failure_and_the_open_batch_age_and_keeps_the_last_success(
        prometheus, new_topic, produce, write_config):
    topic = new_topic(partitions=1)
    produce(topic, {0: [event(0), b"bad", b"worse", event(3)]})
    strict = write_config(kafka={"topics": topic}, job={"max_rejected_ratio": "0.1"},
                          metrics={"pushgateway": prometheus.gateway_url})
    job = load_config(strict).job.name
    failed = run_etl(strict)
    assert failed.returncode == 1, failed.describe()  # the rejected ratio: needs an operator
    assert "metrics not pushed" not in failed.stderr
    assert values(prometheus.wait_for(f'etl_last_run_exit_code{{etl_job="{job}"}}')) == {(): 1.0}
    assert values(prometheus.wait_for(f'etl_open_batch_age_seconds{{etl_job="{job}"}} > 0'))
    assert values(prometheus.wait_for(f'etl_lag_records{{etl_job="{job}"}}')) == {("0", topic): 4.0}
    assert not prometheus.query(f'etl_last_success_timestamp_seconds{{etl_job="{job}"}}')["data"]["result"]

    lenient = write_config(kafka={"topics": topic}, job={"max_rejected_ratio": "0.6"},
                           metrics={"pushgateway": prometheus.gateway_url})
    resumed = run_etl(lenient)
    assert resumed.returncode == 0, resumed.describe()
    assert values(prometheus.wait_for(f'etl_run_rejected_rows{{etl_job="{job}"}} == 2'))
    assert values(prometheus.wait_for(f'etl_open_batch_age_seconds{{etl_job="{job}"}} == 0'))
    success = prometheus.wait_for(f'etl_last_success_timestamp_seconds{{etl_job="{job}"}}')
    failure = prometheus.wait_for(f'etl_last_failure_timestamp_seconds{{etl_job="{job}"}}')
    assert values(success)[()] >= values(failure)[()]  # the success's push kept the failure's time


@pytest.mark.slow
def test_an_unreachable_pushgateway_is_one_warning_and_the_textfile_is_still_written(
        tmp_path, new_topic, produce, write_config):
    topic = new_topic(partitions=2)
    produce(topic, events_by_partition(2, 15))
    textfile = tmp_path / "textfile" / "etl_job.prom"
    textfile.parent.mkdir()
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    config = write_config(kafka={"topics": topic},
                          metrics={"pushgateway": closed, "textfile": str(textfile), "push_timeout_seconds": "2"})
    result = run_etl(config)
    assert result.returncode == 0, result.describe()
    warnings = [line for line in result.stderr.splitlines() if "metrics not pushed" in line]
    assert len(warnings) == 1 and "WARNING" in warnings[0] and closed in warnings[0], result.stderr[-3000:]

    families = {f.name: f for f in text_string_to_metric_families(textfile.read_text())}
    assert sum(s.value for s in families["etl_run_rows"].samples) == 30
    assert {(s.labels["topic"], s.labels["partition"], s.value) for s in families["etl_lag_records"].samples} == \
        {(topic, "0", 0.0), (topic, "1", 0.0)}
    assert not [p for p in textfile.parent.iterdir() if p != textfile]  # no temporary file left behind


def test_a_run_that_finds_the_lock_held_pushes_only_that(prometheus, new_topic, write_config):
    topic = new_topic(partitions=1)
    config = write_config(kafka={"topics": topic}, metrics={"pushgateway": prometheus.gateway_url})
    cfg = load_config(config)
    with ZkStateStore(cfg.zookeeper, cfg.job.name, cfg.retry) as holder:
        assert holder.session.acquire_lock() is None
        blocked = run_etl(config, "--lock-held-exit-code", "99")
    assert blocked.returncode == 99, blocked.describe()
    query = f'etl_last_lock_held_timestamp_seconds{{etl_job="{cfg.job.name}"}}'
    assert values(prometheus.wait_for(f"time() - {query} < 600"))
    # the run holding the lock publishes the rest: nothing of this run's is pushed
    assert not prometheus.query(f'{{etl_job="{cfg.job.name}", __name__=~"etl_run_.*|etl_last_run_exit_code|.*_total"}}'
                                )["data"]["result"]


@pytest.mark.slow
def test_the_textfile_reaches_prometheus_through_node_exporter_under_the_etl_jobs_label(
        prometheus, new_topic, produce, write_config):
    """node_exporter's scrape job has no honor_labels (deploy/prometheus/prometheus.yml): the
    series keep job="node", and the ETL job is in etl_job, not renamed exported_job."""
    topic = new_topic(partitions=2)
    produce(topic, events_by_partition(2, 25))  # N = 50
    textfile = prometheus.textfile_dir / f"etl_{topic}.prom"
    config = write_config(kafka={"topics": topic}, metrics={"textfile": str(textfile)})
    job = load_config(config).job.name
    result = run_etl(config)
    assert result.returncode == 0, result.describe()

    query = f'etl_rows_total{{etl_job="{job}"}}'
    answer = prometheus.wait_for(query)
    print(f"\nPromQL {query} -> {json.dumps(answer)}")
    [series] = answer["data"]["result"]
    assert series["metric"]["job"] == "node" and "exported_job" not in series["metric"], series
    assert float(series["value"][1]) == 50.0
    by_job = prometheus.wait_for(f'count by (job, etl_job) ({{etl_job="{job}"}})')["data"]["result"]
    assert [r["metric"] for r in by_job] == [{"job": "node", "etl_job": job}]
    assert values(prometheus.wait_for(f'sum(etl_run_rows{{etl_job="{job}"}})')) == {(): 50.0}
    assert values(prometheus.wait_for(f'etl_lag_records{{etl_job="{job}"}}')) == {("0", topic): 0.0, ("1", topic): 0.0}
    assert not prometheus.query('{exported_job!=""}')["data"]["result"]


def data_file_bytes(warehouse) -> int:
    return sum(p.stat().st_size for p in warehouse.rglob("*.parquet") if not p.name.startswith("."))


@pytest.mark.slow
def test_the_load_totals_count_each_batch_once_across_a_crash_before_and_after_its_commit(
        tmp_path, zk, new_topic, produce, write_config, warehouse_dir):
    """The totals move in the commit's own transaction: a run killed before it (the batch
    resumed and committed by the next run) and a run killed right after it (the next run finds
    the batch COMMITTED) each count the batch once."""
    topic = new_topic(partitions=2)
    textfile = tmp_path / "etl_totals.prom"
    fast_zk = {"session_timeout_seconds": "4"}  # ZooKeeper's shortest: a killed run's lock goes in 4 s, not 10
    config = write_config(kafka={"topics": topic}, metrics={"textfile": str(textfile)}, zookeeper=fast_zk)
    produce(topic, events_by_partition(2, 20))  # 40
    assert run_etl(config, fault="commit:snapshot-written").returncode < 0
    wait_for_lock_release(zk, config)  # the killed run's session expires
    resumed = run_etl(config, "--lock-held-exit-code", "99")
    assert resumed.returncode == 0 and "batch 1 (resumed) COMMITTED" in resumed.stdout, resumed.describe()
    produce(topic, {0: [event(100 + i) for i in range(7)]})  # 7 more, and one bad record
    produce(topic, {1: [b"not json"]})
    lenient = write_config(kafka={"topics": topic}, job={"max_rejected_ratio": "0.5"},
                           metrics={"textfile": str(textfile)}, zookeeper=fast_zk)
    killed = run_etl(lenient, fault="state:COMMITTED")
    assert killed.returncode < 0, killed.describe()
    wait_for_lock_release(zk, config)
    last = run_etl(lenient, "--lock-held-exit-code", "99")
    assert last.returncode == 0 and "COMMITTED" not in last.stdout, last.describe()  # nothing new

    cfg = load_config(config)
    with ZkStateStore(cfg.zookeeper, cfg.job.name, cfg.retry) as store:
        totals, _ = store.totals.load_totals()
    assert (totals.batches, totals.offsets, totals.rows, totals.rejected) == (2, 48, 47, 1)
    assert totals.bytes == data_file_bytes(warehouse_dir) > 0
    published = {s.name: s.value for f in text_string_to_metric_families(textfile.read_text()) for s in f.samples}
    assert (published["etl_rows_total"], published["etl_rejected_rows_total"], published["etl_batches_total"],
            published["etl_offsets_total"], published["etl_written_bytes_total"]) == (47, 1, 2, 48, totals.bytes)
