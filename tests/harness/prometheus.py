"""A real Prometheus, Pushgateway and node_exporter (the Debian packages' binaries), each a
subprocess of the test on free loopback ports with its own temporary config and storage, never
the system's services.

Prometheus runs the example config itself, deploy/prometheus/prometheus.yml, with its targets
pointed at these processes, scraping every second, and its alert rules loaded: the gateway
with honor_labels: true, node_exporter as a plain `node` scrape job. node_exporter runs its
textfile collector only (every default collector off), on `textfile_dir`.
Usable without pytest:

    with PrometheusStack(tmp_dir) as prom:
        ... push to prom.gateway_url, or write a .prom file into prom.textfile_dir ...
        prom.wait_for("etl_run_rows{etl_job='j'}")  -> the /api/v1/query result list
"""
from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from tests.harness.kills import CLEANUP, sigkill
from tests.harness.paths import REPO
from tests.harness.ports import free_port

PROMETHEUS = "/usr/bin/prometheus"
PUSHGATEWAY = "/usr/bin/prometheus-pushgateway"
PROMTOOL = "/usr/bin/promtool"
NODE_EXPORTER = "/usr/bin/prometheus-node-exporter"
EXAMPLE = REPO / "deploy" / "prometheus"


def missing_binaries() -> list[str]:
    return [path for path in (PROMETHEUS, PUSHGATEWAY, PROMTOOL, NODE_EXPORTER) if shutil.which(path) is None]


class PrometheusStack:
    def __init__(self, workdir: Path):
        self.workdir = Path(workdir)
        self.gateway_port, self.prometheus_port, self.node_port = free_port(), free_port(), free_port()
        self.textfile_dir = self.workdir / "textfile"
        self.gateway_url = f"http://127.0.0.1:{self.gateway_port}"
        self.prometheus_url = f"http://127.0.0.1:{self.prometheus_port}"
        self.processes: list[subprocess.Popen] = []

    def __enter__(self) -> "PrometheusStack":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        self.textfile_dir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "prometheus.yml"
        config.write_text(self.example_config())
        # In memory only: Debian's default persistence file is shared with every other gateway.
        self._spawn("pushgateway", [PUSHGATEWAY, f"--web.listen-address=127.0.0.1:{self.gateway_port}",
                                    "--persistence.file="])
        self._wait_ready(self.gateway_url, "pushgateway")
        self._spawn("node_exporter", [NODE_EXPORTER, f"--web.listen-address=127.0.0.1:{self.node_port}",
                                      "--collector.disable-defaults", "--collector.textfile",
                                      f"--collector.textfile.directory={self.textfile_dir}"])
        self._wait_ready(f"http://127.0.0.1:{self.node_port}", "node_exporter", path="/metrics")
        self._spawn("prometheus", [PROMETHEUS, f"--config.file={config}",
                                   f"--storage.tsdb.path={self.workdir / 'data'}",
                                   f"--web.listen-address=127.0.0.1:{self.prometheus_port}"])
        self._wait_ready(self.prometheus_url, "prometheus")

    def _spawn(self, name: str, command: list[str]) -> None:
        log = open(self.workdir / f"{name}.log", "wb")
        self.processes.append(subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                               stdin=subprocess.DEVNULL, cwd=self.workdir))
        log.close()

    def example_config(self) -> str:
        """deploy/prometheus/prometheus.yml as shipped, but for its targets (these processes),
        its intervals (1s, so that a test waits little) and its rule file's absolute path."""
        text = (EXAMPLE / "prometheus.yml").read_text()
        replaced = {"['pushgateway.example.com:9091']": f"['127.0.0.1:{self.gateway_port}']",
                    "['etl-host.example.com:9100']": f"['127.0.0.1:{self.node_port}']",
                    "scrape_interval: 30s": "scrape_interval: 1s",
                    "evaluation_interval: 30s": "evaluation_interval: 1s",
                    "- etl-alerts.yml": f"- {EXAMPLE / 'etl-alerts.yml'}"}
        for old, new in replaced.items():
            if text.count(old) != 1:
                raise AssertionError(f"deploy/prometheus/prometheus.yml no longer holds {old!r} once")
            text = text.replace(old, new)
        return text

    def _wait_ready(self, url: str, name: str, timeout: float = 60, path: str = "/-/ready") -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in self.processes):
                raise RuntimeError(f"{name} exited: {self.log(name)[-2000:]}")
            try:
                with urllib.request.urlopen(f"{url}{path}", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{name} not ready at {url} within {timeout}s: {self.log(name)[-2000:]}")

    def log(self, name: str) -> str:
        path = self.workdir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                sigkill(process.pid, "Prometheus or its exporter", purpose=CLEANUP)
                process.wait()
        self.processes.clear()

    def query(self, promql: str) -> dict:
        """The JSON answer of /api/v1/query for this instant."""
        url = f"{self.prometheus_url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
        with urllib.request.urlopen(url, timeout=10) as response:
            return json.loads(response.read())

    def wait_for(self, promql: str, timeout: float = 60) -> dict:
        """The first answer whose result is not empty: the gateway was scraped since the push."""
        deadline = time.monotonic() + timeout
        while True:
            answer = self.query(promql)
            if answer["status"] == "success" and answer["data"]["result"]:
                return answer
            if time.monotonic() > deadline:
                raise AssertionError(f"no result for {promql} within {timeout}s: {answer}")
            time.sleep(0.5)
