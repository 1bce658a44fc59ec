"""The tests' free ports: a server a test starts later must still find its port free.

A port the kernel gave as free (bind to port 0) comes from its ephemeral range, the same range
it draws every outgoing connection's local port from. Between the draw and the server's bind,
any client connection of the suite (Kafka, HDFS, ZooKeeper) can take it: stop 49's CI lost a
kerberized ResourceManager that way ("Problem binding to [localhost:50880]")."""
from __future__ import annotations

import importlib
import socket
from pathlib import Path

import pytest

from tests.harness import ports


@pytest.mark.parametrize("module", ["tests.harness.services", "tests.harness.prometheus"])
def test_a_free_port_is_below_the_kernels_ephemeral_range_where_no_client_connection_can_take_it(module):
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    free_port = importlib.import_module(module).free_port
    drawn = [free_port() for _ in range(50)]
    assert all(port < low for port in drawn), drawn


def test_a_port_is_never_handed_out_twice_in_one_process_even_before_its_server_binds_it():
    drawn = [ports.free_port() for _ in range(200)]
    assert len(set(drawn)) == len(drawn)


def test_two_workers_draw_from_bands_that_never_meet(monkeypatch):
    bands = []
    for worker in ("gw0", "gw1", "gw2"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        bands.append(ports.band())
    for one, other in zip(bands, bands[1:]):
        assert one.stop <= other.start, bands


def test_a_port_something_listens_on_is_never_drawn(monkeypatch):
    taken = ports.band().start
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", taken))
        holder.listen()
        monkeypatch.setattr(ports, "_start", lambda band: band.start)
        monkeypatch.setattr(ports, "_handed_out", set())
        assert ports.free_port() == taken + 1


def test_a_run_of_ports_is_free_as_a_whole():
    first = ports.free_run(4)
    assert all(ports.bindable(first + i) for i in range(4))
