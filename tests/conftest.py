"""The whole suite's order: the modules whose tests start one of the session's own clusters run
last, each group together, so that those daemons are not started by the first test that needs
them and then left idle (memory, heartbeats on 2 cores) while the rest of the suite runs.

The YARN over its private HDFS and the standalone cluster (test_airflow_dag.py,
test_standalone_cluster.py, test_yarn.py) start, then the KDC with its kerberized HDFS and
metastore (test_kerberos*.py). Each is stopped as soon as the next test on the process belongs
to a later group or to none (tests/harness/lifetimes.py), not at the session's end. A module moves
as a whole (its module-scoped fixtures are set up once) and the order inside a group is
collection order, but for the modules that run from a venv scripts/test builds while the suite
starts (WAITS_FOR_VENV): they come last in their group. A run that selects none of them is not
reordered. On several workers (ETL_TEST_WORKERS, tests/harness/parallel.py) they run first
instead, all on one worker, while the other workers take the rest, a whole module at a time.

At the end of a run, the report adds where the suite's time went by module (setup, call and
teardown summed): the module-scoped fixtures that --durations shows once are counted there too;
then how many `etl` processes the tests waited for, and their seconds, by command; last, the
coverage line: the tests run, passed, failed and skipped (the skips by reason), and the SIGKILLs
that landed by what they killed (tests/harness/kills.py), so that a cut in coverage shows in the
report. Every test's seconds are kept in pytest's cache (`.pytest_cache/v/etl/test-seconds`), for
a look at more than the slowest 40.
"""
from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from tests.harness import lifetimes, parallel
from tests.harness.lifetimes import CLUSTER_GROUPS

_MODULE_GROUPS: dict[str, int] = {}  # each collected module's group (0: none), as the order has it


def _group(item: pytest.Item) -> int:
    """The item's group: its fixtures', and those its module requests by getfixturevalue (which
    the module names in DYNAMIC_FIXTURES, as pytest cannot see them before the test runs)."""
    return max((CLUSTER_GROUPS.get(name, 0) for name in _fixtures_of(item)), default=0)


def _fixtures_of(item: pytest.Item) -> list[str]:
    return [*getattr(item, "fixturenames", ()), *getattr(getattr(item, "module", None), "DYNAMIC_FIXTURES", ())]


def _waits_for_a_venv(item: pytest.Item) -> bool:
    """Whether the item's module runs from a venv that scripts/test builds while the suite starts
    (its WAITS_FOR_VENV, tests/harness/side_venvs.py): last in its group, so that the build has
    ended by then."""
    return bool(getattr(getattr(item, "module", None), "WAITS_FOR_VENV", None))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    by_module: dict[str, tuple[int, bool]] = {}
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        group, waits = by_module.get(module, (0, False))
        by_module[module] = (max(group, _group(item)), waits or _waits_for_a_venv(item))
    items.sort(key=lambda item: by_module[item.nodeid.split("::", 1)[0]])  # stable: collection order within
    _MODULE_GROUPS.update({module: group for module, (group, _) in by_module.items()})
    if parallel.on_worker():  # the cluster modules run first, on one worker (tests/harness/parallel.py)
        parallel.clusters_first(items, {module for module, (group, _) in by_module.items() if group})


def pytest_runtest_setup(item: pytest.Item) -> None:
    lifetimes.refuse_stopped(_fixtures_of(item))


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """The clusters no later test on this process needs stop now: the next test's module is of a
    later group, or of none (the cluster modules run together, group after group)."""
    group = 0 if nextitem is None else _MODULE_GROUPS.get(nextitem.nodeid.split("::", 1)[0], 0)
    lifetimes.stop_unneeded(group or None)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    return parallel.ModuleScheduling(config, log)


def pytest_sessionfinish(session: pytest.Session) -> None:
    parallel.send_to_controller(session.config)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    parallel.receive_from_worker(node)


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
    _report_coverage(terminalreporter)
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


def _report_coverage(terminalreporter) -> None:
    """One line that a cut in coverage changes: the tests by outcome, from pytest's own reports,
    and the SIGKILLs that landed by what they killed; then the skips by reason, and the cleanup
    kills (leftovers killed after a test: not coverage) and those that found their target gone."""
    from tests.harness.kills import CLEANUP, FAULT_POINT, KILLS
    outcomes = outcomes_of(terminalreporter.stats)
    on_purpose = [kill for kill in KILLS if kill.landed and kill.purpose != CLEANUP]
    counted = Counter(f"{kill.what} (fault point)" if kill.by == FAULT_POINT else kill.what for kill in on_purpose)
    terminalreporter.section(f"coverage: {outcomes.describe()}, SIGKILLs landed: {len(on_purpose)}"
                             f"{_breakdown(counted)}")
    for reason, count in sorted(outcomes.skip_reasons.items(), key=lambda pair: (-pair[1], pair[0])):
        terminalreporter.write_line(f"{count:5d} skipped: {reason}")
    cleanup = Counter(kill.what for kill in KILLS if kill.landed and kill.purpose == CLEANUP)
    missed = sum(1 for kill in KILLS if not kill.landed)
    terminalreporter.write_line(f"cleanup SIGKILLs landed (leftovers killed so that the next test starts clean, not "
                                f"coverage): {sum(cleanup.values())}{_breakdown(cleanup)}")
    terminalreporter.write_line(f"SIGKILLs that found their target already gone: {missed}")


def _breakdown(counted: Counter) -> str:
    return f" ({', '.join(f'{what} {n}' for what, n in sorted(counted.items(), key=lambda p: (-p[1], p[0])))})" \
        if counted else ""


class Outcomes:
    """The tests of a run by outcome, each test once under its worst (a test that passed and
    then failed its teardown counts as an error), and the skipped tests by reason."""

    ORDER = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")

    def __init__(self, by_test: dict[str, str], skip_reasons: dict[str, str]):
        self.by_test = by_test
        self.counts = Counter(by_test.values())
        self.skip_reasons = Counter(skip_reasons[test] for test, outcome in by_test.items() if outcome == "skipped")

    def describe(self) -> str:
        always = ("passed", "failed", "skipped")
        parts = [f"{self.counts[outcome]} {outcome if outcome != 'error' else 'errors'}" for outcome in self.ORDER
                 if outcome in always or self.counts[outcome]]
        return f"{len(self.by_test)} tests run ({', '.join(parts)})"


def outcomes_of(stats: dict[str, list]) -> Outcomes:
    """Outcomes from terminalreporter.stats, where pytest files a test's reports (setup, call,
    teardown) under their outcome (a passed setup or teardown under none)."""
    by_test: dict[str, str] = {}
    skip_reasons: dict[str, str] = {}
    for outcome in Outcomes.ORDER:
        for report in stats.get(outcome, ()):
            if getattr(report, "when", None) not in ("setup", "call", "teardown"):
                continue  # a collection error, a warning: not a test
            if report.nodeid not in by_test or _WORSE[outcome] > _WORSE[by_test[report.nodeid]]:
                by_test[report.nodeid] = outcome
            if outcome == "skipped":
                skip_reasons[report.nodeid] = _skip_reason(report)
    return Outcomes(by_test, skip_reasons)


_WORSE = {"passed": 0, "xfailed": 1, "skipped": 2, "xpassed": 3, "failed": 4, "error": 5}


def _skip_reason(report) -> str:
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return reason.removeprefix("Skipped: ")
