"""The suite on several processes (pytest-xdist; scripts/test runs ETL_TEST_WORKERS of them).

Every test already has its own ZooKeeper chroot, topic, table and folders, and the local stack's
services are shared, so tests of different modules can run at once. Two rules keep it as it is
serial, and `ModuleScheduling` applies them:
- a module runs whole on one worker, so that its module-scoped fixtures are set up once;
- the modules that start clusters of the session's own (YARN, the standalone cluster, the KDC:
  CLUSTER_MODULES) all run on one worker, one after another, and first: together they are the
  longest chain of the run, and each cluster then starts once.
(pytest-xdist's own `--dist loadgroup` would do the second, but with pytest 9 its groups are
lost: it renames the nodeid through an attribute pytest no longer reads.)
What the tests of a worker record of their processes (the `etl` processes waited for, the
SIGKILLs) reaches the controller when the worker ends, so that the report counts every worker's.
"""
from __future__ import annotations

import os
from dataclasses import asdict

import pytest
from xdist.scheduler import LoadScopeScheduling

CLUSTERS = "clusters"
# The modules whose tests ask for a cluster fixture (tests/conftest.py CLUSTER_GROUPS); a worker's
# collection refuses to run when the fixtures say otherwise, so this list cannot go stale.
CLUSTER_MODULES = frozenset({
    "tests/integration/test_airflow_dag.py",
    "tests/integration/test_standalone_cluster.py",
    "tests/integration/test_yarn.py",
    "tests/integration/test_kerberos.py",
    "tests/integration/test_kerberos_yarn.py",
})


class ModuleScheduling(LoadScopeScheduling):
    """Whole modules to whichever worker is free, in collection order; CLUSTER_MODULES as one."""

    def _split_scope(self, nodeid: str) -> str:
        module = nodeid.split("::", 1)[0]
        return CLUSTERS if module in CLUSTER_MODULES else module


def on_worker() -> bool:
    return bool(os.environ.get("PYTEST_XDIST_WORKER"))


def clusters_first(items: list[pytest.Item], cluster_modules: set[str]) -> None:
    """On a worker: the cluster modules first (stable); refused if CLUSTER_MODULES is not them."""
    collected = {item.nodeid.split("::", 1)[0] for item in items}
    expected = {module for module in CLUSTER_MODULES if module in collected}
    if cluster_modules != expected:
        raise pytest.UsageError(f"tests/harness/parallel.py CLUSTER_MODULES is stale: these modules start clusters "
                                f"{sorted(cluster_modules)}, it names {sorted(expected)}")
    items.sort(key=lambda item: item.nodeid.split("::", 1)[0] not in cluster_modules)


def send_to_controller(config: pytest.Config) -> None:
    """On a worker, at its end: its records, for the controller's report."""
    from tests.harness.etl_process import FINISHED
    from tests.harness.kills import KILLS
    output = getattr(config, "workeroutput", None)
    if output is not None:
        output["etl_finished"] = [list(finished) for finished in FINISHED]
        output["etl_kills"] = [asdict(kill) for kill in KILLS]


def receive_from_worker(node) -> None:
    """On the controller, as a worker ends: its records added to the controller's own."""
    from tests.harness.etl_process import FINISHED
    from tests.harness.kills import KILLS, Kill
    output = getattr(node, "workeroutput", {}) or {}
    FINISHED.extend((command, seconds) for command, seconds in output.get("etl_finished", ()))
    KILLS.extend(Kill(**kill) for kill in output.get("etl_kills", ()))
