"""Publishing a run's metrics (etl.ops.metrics_publish) without the stack: the textfile is
replaced atomically and keeps what this run did not measure; a gateway that does not answer
is one WARNING and no exception."""
import logging
import os
import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.parser import text_string_to_metric_families

from etl.config.metrics import MetricsConfig
from etl.ops.metrics_publish import publish, push, write_textfile


def registry(**gauges: float) -> CollectorRegistry:
    r = CollectorRegistry()
    for name, value in gauges.items():
        Gauge(name, f"{name} help", ["etl_job"], registry=r).labels(etl_job="j1").set(value)
    return r


def read(path) -> dict[str, float]:
    return {s.name: s.value for f in text_string_to_metric_families(path.read_text()) for s in f.samples}


def test_the_textfile_parses_and_keeps_what_this_run_did_not_measure(tmp_path):
    path = tmp_path / "etl_j1.prom"
    assert write_textfile(path, registry(etl_run_rows=120, etl_last_success_timestamp_seconds=1000))
    assert read(path) == {"etl_run_rows": 120, "etl_last_success_timestamp_seconds": 1000}
    # a failed run: its own rows and failure time, the last success's time carried over
    assert write_textfile(path, registry(etl_run_rows=0, etl_last_failure_timestamp_seconds=2000))
    assert read(path) == {"etl_run_rows": 0, "etl_last_failure_timestamp_seconds": 2000,
                          "etl_last_success_timestamp_seconds": 1000}
    assert os.listdir(tmp_path) == ["etl_j1.prom"]  # the temporary file was renamed over it
    assert oct(path.stat().st_mode & 0o777) == "0o644"


def test_the_textfile_keeps_a_counter_as_a_counter_and_drops_the_families_of_a_version_before_etl_job(tmp_path):
    """A lock-held run publishes no totals: the last run's counters stay, still counters. The
    families an older version wrote (label `job`, old names) are not carried over for ever."""
    path = tmp_path / "etl_j1.prom"
    path.write_text('# TYPE etl_run_bytes_written gauge\netl_run_bytes_written{job="j1",table="db.t"} 5.0\n')
    first = registry(etl_run_rows=3)
    Counter("etl_rows", "rows", ["etl_job"], registry=first).labels(etl_job="j1").inc(120)
    assert write_textfile(path, first)
    assert write_textfile(path, registry(etl_last_lock_held_timestamp_seconds=9))
    text = path.read_text()
    assert "# TYPE etl_rows_total counter" in text and 'etl_rows_total{etl_job="j1"} 120.0' in text
    assert "etl_run_bytes_written" not in text and "etl_run_rows" in text


def test_a_replaced_textfile_is_never_seen_half_written(tmp_path):
    """os.replace swaps the file whole: a reader holding the old file still reads it all."""
    path = tmp_path / "etl_j1.prom"
    write_textfile(path, registry(etl_run_rows=1))
    with open(path) as old:
        write_textfile(path, registry(etl_run_rows=2))
        assert "etl_run_rows{etl_job=\"j1\"} 1.0" in old.read()
    assert read(path)["etl_run_rows"] == 2


def test_a_folder_removed_since_the_config_was_read_is_one_warning(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        assert not write_textfile(tmp_path / "gone" / "etl_j1.prom", registry(etl_run_rows=1))
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert "metrics not written to" in caplog.records[0].getMessage()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_refused_push_is_one_warning(caplog):
    url = f"http://127.0.0.1:{closed_port()}"
    with caplog.at_level(logging.WARNING):
        publish(MetricsConfig(pushgateway=url, push_timeout_seconds=2), "j1", registry(etl_run_rows=1))
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert url in caplog.records[0].getMessage() and "refused" in caplog.records[0].getMessage()


class _Answer(BaseHTTPRequestHandler):
    """A gateway that answers 500 to a push, or never answers."""

    def do_POST(self):
        if self.server.hang:
            self.server.release.wait(10)
            return
        self.send_response(500)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("hang, reason", [(False, "HTTP 500"), (True, "timed out")])
def test_an_http_error_or_a_silent_gateway_is_one_warning(caplog, hang, reason):
    server = HTTPServer(("127.0.0.1", 0), _Answer)
    server.hang, server.release = hang, threading.Event()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        config = MetricsConfig(pushgateway=f"http://127.0.0.1:{server.server_port}", push_timeout_seconds=0.5)
        with caplog.at_level(logging.WARNING):
            assert not push(config, "j1", registry(etl_run_rows=1))
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert reason in caplog.records[0].getMessage()
