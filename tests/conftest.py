"""The whole suite's order: the modules whose tests start one of the session's own clusters run
last, each group together, so that those daemons are not started by the first test that needs
them and then left idle (memory, heartbeats on 2 cores) while the rest of the suite runs.

Session fixtures live until the session ends: the YARN over its private HDFS and the standalone
cluster (test_airflow_dag.py, test_standalone_cluster.py, test_yarn.py) start, then the KDC with
its kerberized HDFS and metastore (test_kerberos*.py) start last and idle never. A module moves
as a whole (its module-scoped fixtures are set up once) and the order inside a group is
collection order. A run that selects none of them is not reordered.

At the end of a run, the report adds where the suite's time went by module (setup, call and
teardown summed): the module-scoped fixtures that --durations shows once are counted there too;
then how many `etl` processes the tests waited for, and their seconds, by command. Every test's
seconds are kept in pytest's cache (`.pytest_cache/v/etl/test-seconds`), for a look at more than
the slowest 40.
"""
from __future__ import annotations

from collections import defaultdict

import pytest

# Session fixtures that start clusters of the session's own, by the group they run in (1 first).
CLUSTER_GROUPS = {"yarn": 1, "spark_standalone": 1, "kdc": 2}


def _group(item: pytest.Item) -> int:
    """The item's group: its fixtures', and those its module requests by getfixturevalue (which
    the module names in DYNAMIC_FIXTURES, as pytest cannot see them before the test runs)."""
    names = [*getattr(item, "fixturenames", ()), *getattr(getattr(item, "module", None), "DYNAMIC_FIXTURES", ())]
    return max((CLUSTER_GROUPS.get(name, 0) for name in names), default=0)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    by_module: dict[str, int] = {}
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        by_module[module] = max(by_module.get(module, 0), _group(item))
    items.sort(key=lambda item: by_module[item.nodeid.split("::", 1)[0]])  # stable: collection order within


MODULES_REPORTED = 25
_SECONDS_BY_MODULE: defaultdict[str, float] = defaultdict(float)


_SECONDS_BY_TEST: defaultdict[str, float] = defaultdict(float)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _SECONDS_BY_MODULE[report.nodeid.split("::", 1)[0]] += report.duration
    _SECONDS_BY_TEST[report.nodeid] += report.duration


def pytest_terminal_summary(terminalreporter, config) -> None:
    if not _SECONDS_BY_MODULE:
        return
    total = sum(_SECONDS_BY_MODULE.values())
    terminalreporter.section(f"seconds by module (the {MODULES_REPORTED} slowest; {total:.0f} s in all)")
    slowest = sorted(_SECONDS_BY_MODULE.items(), key=lambda pair: -pair[1])[:MODULES_REPORTED]
    for module, seconds in slowest:
        terminalreporter.write_line(f"{seconds:8.1f}s {100 * seconds / total:5.1f}%  {module}")
    _report_etl_processes(terminalreporter)
    cache = getattr(config, "cache", None)  # none under -p no:cacheprovider
    if cache is not None:
        cache.set("etl/test-seconds", {test: round(seconds, 2) for test, seconds in
                                              sorted(_SECONDS_BY_TEST.items(), key=lambda pair: -pair[1])})


def _report_etl_processes(terminalreporter) -> None:
    from tests.harness.etl_process import FINISHED
    if not FINISHED:
        return
    by_command: defaultdict[str, list[float]] = defaultdict(list)
    for command, seconds in FINISHED:
        by_command[command].append(seconds)
    terminalreporter.section(f"etl processes waited for: {len(FINISHED)}, {sum(s for _, s in FINISHED):.0f} s in all")
    for command, times in sorted(by_command.items(), key=lambda pair: -sum(pair[1])):
        terminalreporter.write_line(f"{sum(times):8.1f}s {len(times):5d} x etl {command} "
                                    f"(median {sorted(times)[len(times) // 2]:.1f}s)")
