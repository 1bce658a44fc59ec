"""Free loopback ports for the servers a test starts: drawn where nothing else can take them
between the draw and the server's bind.

Asking the kernel (bind to port 0) hands out a port of its ephemeral range, the range it also
draws every outgoing connection's local port from; any client of the suite can take that port
before the server binds it. So ports come from below the ephemeral range, in a band of their
own per pytest-xdist worker, and never twice from one process."""
from __future__ import annotations

import os
import random
import socket
from pathlib import Path

LOWEST = 20000  # above every fixed port of the local stack (scripts/local-stack: all below 10001)
WORKER_BANDS = 8
_handed_out: set[int] = set()


def ephemeral_range() -> tuple[int, int]:
    low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
    return int(low), int(high)


def band() -> range:
    """This process's ports: its worker's share of [LOWEST, the ephemeral range's start)."""
    top = ephemeral_range()[0]
    if top - LOWEST < WORKER_BANDS * 100:
        raise RuntimeError(f"no room for test ports below the ephemeral range ({top}); "
                           "lower net.ipv4.ip_local_port_range's start")
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    index = int(worker) % WORKER_BANDS if worker.isdigit() else 0
    width = (top - LOWEST) // WORKER_BANDS
    return range(LOWEST + index * width, LOWEST + (index + 1) * width)


def bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _start(ports: range) -> int:
    return random.randrange(ports.start, ports.stop)


def free_run(length: int = 1) -> int:
    """The first of `length` consecutive free ports, none handed out before by this process."""
    ports = band()
    first = _start(ports)
    for step in range(len(ports)):
        port = ports.start + (first - ports.start + step) % len(ports)
        run = range(port, port + length)
        if run.stop <= ports.stop and not _handed_out.intersection(run) and all(map(bindable, run)):
            _handed_out.update(run)
            return port
    raise RuntimeError(f"no {length} free consecutive ports in {ports}")


def free_port() -> int:
    return free_run(1)
