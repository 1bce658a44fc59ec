"""The one local stack (scripts/local-stack): ZooKeeper, the Apache Kafka broker, the Hive
metastore and the Spark Thrift Server (the analysts' JDBC endpoint on that metastore).

Ports follow the script: ETL_ZK_PORT, ETL_KAFKA_PORT, ETL_METASTORE_PORT, ETL_THRIFT_PORT. The
benchmark also reads .stack/env (written by scripts/local-stack) and whole endpoints
(ETL_ZK_HOSTS, ETL_KAFKA_BOOTSTRAP, ETL_METASTORE_URI, ETL_THRIFT_URL) when they are set.
"""
from __future__ import annotations

import os
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from tests.harness.paths import REPO

STACK_ENV_FILE = REPO / ".stack" / "env"


class StackDown(RuntimeError):
    """A service of the local stack does not answer (and could not be started)."""


@dataclass(frozen=True)
class Stack:
    zk_hosts: str  # 127.0.0.1:2181
    kafka_bootstrap: str  # 127.0.0.1:9092
    metastore_uri: str  # thrift://127.0.0.1:9083
    thrift_url: str  # jdbc:hive2://127.0.0.1:10000/default, the Spark Thrift Server (HiveServer2)

    @classmethod
    def from_environment(cls, env_file: Path | None = None) -> "Stack":
        """Endpoints from the environment (and `env_file` under it, when given)."""
        values = _read_env_file(env_file) if env_file is not None else {}
        values.update({k: v for k, v in os.environ.items() if k.startswith("ETL_")})
        return cls(
            zk_hosts=values.get("ETL_ZK_HOSTS") or f"127.0.0.1:{values.get('ETL_ZK_PORT', 2181)}",
            kafka_bootstrap=values.get("ETL_KAFKA_BOOTSTRAP") or f"127.0.0.1:{values.get('ETL_KAFKA_PORT', 9092)}",
            metastore_uri=(values.get("ETL_METASTORE_URI")
                           or f"thrift://127.0.0.1:{values.get('ETL_METASTORE_PORT', 9083)}"),
            thrift_url=(values.get("ETL_THRIFT_URL")
                        or f"jdbc:hive2://127.0.0.1:{values.get('ETL_THRIFT_PORT', 10000)}/default"),
        )

    def endpoints(self) -> dict[str, tuple[str, int]]:
        """{service: (host, port)} of the first host of each endpoint."""
        thrift = self.thrift_url.removeprefix("jdbc:hive2://").split("/", 1)[0]
        named = {"ZooKeeper": self.zk_hosts.split(",")[0], "Kafka": self.kafka_bootstrap.split(",")[0],
                 "metastore": self.metastore_uri.removeprefix("thrift://"), "Thrift Server": thrift}
        return {what: (address.rpartition(":")[0], int(address.rpartition(":")[2]))
                for what, address in named.items()}


def _read_env_file(path: Path) -> dict[str, str]:
    values = {}
    if path.exists():
        for line in path.read_text().splitlines():
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


def port_open(host: str, port: int, timeout: float = 2) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def zk_ok(host: str, port: int) -> bool:
    """ZooKeeper answers its four-letter `ruok` (an open port alone may still be starting)."""
    try:
        with socket.create_connection((host, port), timeout=2) as sock:
            sock.sendall(b"ruok")
            return sock.recv(16) == b"imok"
    except OSError:
        return False


def silent_services(stack: Stack, services: Mapping[str, bool] | None = None) -> list[str]:
    """The services of `stack` that do not answer (`services`: which to check, all by default)."""
    silent = []
    for what, (host, port) in stack.endpoints().items():
        if services is not None and not services.get(what, False):
            continue
        answers = zk_ok(host, port) if what == "ZooKeeper" else port_open(host, port)
        if not answers:
            silent.append(what)
    return silent


def ensure_up(stack: Stack) -> Stack:
    """Start the local stack (scripts/local-stack up) unless every service answers; the Thrift
    Server listens only once it can answer, so its port is the last sign of a ready stack."""
    if silent_services(stack):
        result = subprocess.run([str(REPO / "scripts" / "local-stack"), "up"], capture_output=True, text=True)
        if result.returncode != 0:
            raise StackDown(f"scripts/local-stack up failed:\n{result.stdout}\n{result.stderr}")
    return stack
