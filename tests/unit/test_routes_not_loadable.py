"""A topic with committed offsets that the routes can no longer load (two routes now choose it,
its templated name clashes): every `etl run` refuses it (exit 2, etl.job.batch_tables), so `etl
status`, `etl check` and the run's metrics must not read as fine. Its partitions count in the lag,
`check` says UNKNOWN naming it, `status --max-lag` lists it, and `etl_unloadable_topics` counts it.
On the in-memory store (tests.harness.memory_store); Kafka's answers are given (_Kafka), the
routing applied to them is the commands' own (etl.context.job)."""
from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from etl.config import load_config
from etl.context.job import JobContext
from etl.model.batch import OffsetRange
from etl.model.binding import BindingMismatch
from etl.model.route_binding import RouteBinding, check_job_binding
from etl.ops.check import NagiosState, judge, read_lags
from etl.ops.metrics import FAILURE, RunMetrics, build_registry, published_metrics
from etl.ops.status import collect_status, over_max_lag, render_status
from etl.sink.fs import LocalFileSystem
from etl.sink.warehouse import Warehouse
from etl.source.topics import JobTopics
from tests.harness.config_file import routed_ini
from tests.harness.memory_store import MemoryStore
from tests.harness.paths import EVENTS_SCHEMA
from tests.harness.ports import free_port
from tests.harness.store_contract import batch, committed


def _route(name: str, table: str, topics: str = "", regex: str = "") -> str:
    chooses = f"topics_regex = {regex}" if regex else f"topics = {topics}"
    return f"[route {name}]\n{chooses}\ntable = {table}\nschema = {EVENTS_SCHEMA}\n"


RAW, ORDERS = _route("raw", "raw_{topic}", regex="app[.].*"), _route("orders", "orders", "orders")
TWICE = RAW + ORDERS + _route("x", "x_{topic}", regex="app[.]x")  # app.x: chosen by two routes, whole


def _config(tmp_path, name: str, routes: str, more: str = ""):
    ini = (routed_ini(routes + more).replace("url = file:///tmp/w", f"url = file://{tmp_path}/w")
           .replace("hosts = 127.0.0.1:2181", f"hosts = 127.0.0.1:{free_port()}")
           .replace("bootstrap.servers = 127.0.0.1:9092", f"bootstrap.servers = 127.0.0.1:{free_port()}"))
    (tmp_path / f"{name}.ini").write_text(ini)
    return load_config(tmp_path / f"{name}.ini")


class _Kafka:
    """Kafka's answers (etl.source.kafka.KafkaMetadata's questions): one partition per topic,
    `high` records each; the routing applied to the topics is the context's own."""

    def __init__(self, context: JobContext, high: dict[str, int]):
        self.routing, self.high = context._topic_routing(), high

    def job_topics(self) -> JobTopics:
        return self.routing.apply(JobTopics(tuple(self.high)))

    def partitions(self, topics):
        return [(topic, 0) for topic in topics]

    def watermarks(self, partitions):
        return {(topic, p): (0, self.high[topic]) for topic, p in partitions}

    def topics_on_broker(self):
        return frozenset(self.high)


@pytest.fixture
def job(tmp_path):
    """A job bound to RAW and ORDERS that loaded app.x and orders (5 records each, all committed):
    no lag at all."""
    before = _config(tmp_path, "before", RAW + ORDERS)
    store = MemoryStore()
    store.session.acquire_lock()
    store.operator.bind_first(RouteBinding.of(before, Warehouse.of(before)))
    committed(store, batch(ranges=(OffsetRange("app.x", 0, 0, 5, None), OffsetRange("orders", 0, 0, 5, None))))
    store.session.release_lock()
    return store


def _context(config, store) -> JobContext:
    context = JobContext(config, store=store, fs=LocalFileSystem())
    context._kafka = _Kafka(context, {"app.x": 5, "orders": 5})
    return context


def test_a_loaded_topic_the_routes_cannot_load_is_unknown_to_check_and_counts_in_the_lag(tmp_path, job):
    twice = _config(tmp_path, "twice", TWICE)
    with pytest.raises(BindingMismatch):  # what every run says
        check_job_binding(job.operator.binding(), RouteBinding.of(twice, Warehouse.of(twice)), twice,
                          lambda: ["app.x", "orders"])
    with _context(twice, job) as context:
        lags = read_lags(context.store, context.kafka)
    assert [(p.topic, p.lag) for p in lags.partitions] == [("orders", 0), ("app.x", 0)]
    result = judge("j1", lags.partitions, 10, 100, lags.not_loadable)
    assert result.state is NagiosState.UNKNOWN, result.line
    assert result.line.startswith("ETL UNKNOWN - job j1: topic app.x has committed offsets and cannot be loaded: "
                                  "[route raw] takes all of topic 'app.x'"), result.line
    assert result.line.endswith("| max_lag=0;10;100;0; total_lag=0;;;0;"), result.line
    with _context(_config(tmp_path, "fine", RAW + ORDERS), job) as context:
        lags = read_lags(context.store, context.kafka)
    assert judge("j1", lags.partitions, 10, 100, lags.not_loadable).state is NagiosState.OK


def test_status_shows_a_loaded_topic_the_routes_cannot_load_and_max_lag_counts_it(tmp_path, job):
    twice = _config(tmp_path, "twice", TWICE)
    with _context(twice, job) as context:
        status = collect_status(twice, context.store, context.kafka)
    assert [p["topic"] for p in status["partitions"]] == ["orders", "app.x"]
    [stuck] = status["not_loadable"]
    assert stuck["topic"] == "app.x" and stuck["why"].startswith("[route raw] takes all of topic 'app.x'"), stuck
    assert "CANNOT LOAD topic app.x (it has committed offsets): [route raw] takes all" in render_status(status)
    assert over_max_lag(status, 100) == [{"topic": "app.x", "partition": 0, "lag": 0, "not_loadable": True}]


def test_the_runs_metrics_count_the_loaded_topics_the_routes_cannot_load(tmp_path, job):
    twice = _config(tmp_path, "twice", TWICE, f"[metrics]\ntextfile = {tmp_path}/etl_j1.prom\n")
    metrics = RunMetrics(twice)
    metrics.context = _context(twice, job)
    with metrics.context:
        published = {s.name: s.value for f in build_registry(metrics, FAILURE, 1).collect() for s in f.samples}
    assert published["etl_unloadable_topics"] == 1
    metrics.context = _context(_config(tmp_path, "fine", RAW + ORDERS), job)
    with metrics.context:
        published = {s.name: s.value for f in build_registry(metrics, FAILURE, 1).collect() for s in f.samples}
    assert published["etl_unloadable_topics"] == 0


def test_a_run_refusing_a_loaded_topic_it_cannot_load_publishes_the_count(tmp_path, job):
    """The run exits 2 on it, and reads no state after a config error: the refusal says how many."""
    twice = _config(tmp_path, "twice", TWICE, f"[metrics]\ntextfile = {tmp_path}/etl_j1.prom\n")
    with pytest.raises(BindingMismatch) as raised:
        with published_metrics(twice):
            check_job_binding(job.operator.binding(), RouteBinding.of(twice, Warehouse.of(twice)), twice,
                              lambda: ["app.x", "orders"])
    assert raised.value.not_loadable == ("app.x",)
    published = {s.name: s.value for f in text_string_to_metric_families((tmp_path / "etl_j1.prom").read_text())
                 for s in f.samples}
    assert published["etl_last_run_exit_code"] == 2 and published["etl_unloadable_topics"] == 1
