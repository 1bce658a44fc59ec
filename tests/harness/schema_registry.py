"""The Schema Registry a test gets: the test server (schema_registry_server.py) in this process
or in its own, or a real registry when $ETL_TEST_SCHEMA_REGISTRY_URL names one.

A real registry is shared by every test and run, so tests must keep to subjects of their own
(derived from per-test topic names); it keeps no request log for tests, and a test must not
stop it. A test server in this process is cheap, one per test, each its own namespace. The
one in its own process (`RegistryProcess`) is the one a test may stop or kill mid-batch and
start again on the same port and data folder, with the same ids.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from tests.harness.etl_process import die_with_us
from tests.harness.kills import CLEANUP, ON_PURPOSE, sigkill
from tests.harness.paths import REPO
from tests.harness.schema_registry_server import (TEST_REQUESTS, Request, SchemaRegistryServer, basic_auth_header,
                                                  schema_fetches)
from tests.harness.ports import free_port

REGISTRY_ENV = "ETL_TEST_SCHEMA_REGISTRY_URL"


@dataclass(frozen=True)
class ExternalRegistry:
    """The real registry at $ETL_TEST_SCHEMA_REGISTRY_URL (credentials, if any, in the URL)."""
    url: str


@contextmanager
def registry_for_tests(data_dir: Path) -> Iterator[SchemaRegistryServer | ExternalRegistry]:
    """The real registry when the environment names one, else a fresh test server in this
    process, keeping its schemas in `data_dir`, stopped on the way out."""
    url = os.environ.get(REGISTRY_ENV)
    if url:
        yield ExternalRegistry(url.rstrip("/"))
        return
    with SchemaRegistryServer(data_dir) as server:
        yield server


def why_no_stoppable_registry() -> str | None:
    """Why a test cannot have a registry it may stop (a skip reason), or None when it can."""
    if os.environ.get(REGISTRY_ENV):
        return f"${REGISTRY_ENV} points the tests at a real registry, which a test must not stop"
    return None


class RegistryProcess:
    """The test server in its own process, on one port and data folder for the object's life:
    start(), stop() (SIGTERM), kill() (SIGKILL), start() again. Its output goes to
    `log_path`, beside the schemas."""

    def __init__(self, data_dir: Path, port: int | None = None, auth: str | None = None):
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.auth = auth
        self.log_path = self.data_dir / "registry.log"
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30) -> "RegistryProcess":
        """Start the server and wait until it listens ("listening on" in this run's output)."""
        if self.proc is not None and self.proc.poll() is None:
            raise RuntimeError(f"the schema registry test server on {self.port} is already running")
        command = [sys.executable, "-m", "tests.harness.schema_registry_server", "--data", str(self.data_dir),
                   "--port", str(self.port), *(["--auth", self.auth] if self.auth else [])]
        output_from = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(die_with_us(command), cwd=REPO, stdout=log, stderr=log,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while b"listening on" not in self.log_path.read_bytes()[output_from:]:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill(CLEANUP)
                output = self.log_path.read_bytes()[output_from:].decode(errors="replace")
                raise RuntimeError(f"the schema registry test server did not listen on {self.port}:\n{output}")
            time.sleep(0.05)
        return self

    def stop(self, timeout: float = 20) -> None:
        self._end(signal.SIGTERM, timeout)

    def kill(self, purpose: str = ON_PURPOSE) -> None:
        if self.proc is not None and self.proc.poll() is None:
            sigkill(self.proc.pid, "schema registry", purpose=purpose)
            self.proc.wait(20)

    def _end(self, sig: signal.Signals, timeout: float) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout)

    def requests(self) -> list[Request]:
        """The server's request log, from its test-only endpoint."""
        request = urllib.request.Request(f"{self.url}/{'/'.join(TEST_REQUESTS)}")
        if self.auth:
            request.add_header("Authorization", basic_auth_header(self.auth))
        with urllib.request.urlopen(request, timeout=10) as answer:
            return [Request(**r) for r in json.load(answer)]

    def schema_fetches(self, schema_id: int | None = None) -> int:
        return schema_fetches(self.requests(), schema_id)

    def __enter__(self) -> "RegistryProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
