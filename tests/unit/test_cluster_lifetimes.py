"""The session's own clusters stop once no later test on the process needs them
(tests/harness/lifetimes.py): each is stopped once, latest first, and a test that asks for one
stopped so fails, naming it."""
from __future__ import annotations

import pytest

from tests.harness import lifetimes


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.setattr(lifetimes, "_RUNNING", [])
    monkeypatch.setattr(lifetimes, "STOPPED_EARLY", set())


def test_a_later_group_stops_the_earlier_groups_latest_first():
    running = ["yarn", "spark_standalone", "kdc", "secure_hdfs"]
    assert lifetimes.to_stop(running, 1) == []
    assert lifetimes.to_stop(running, 2) == ["spark_standalone", "yarn"]
    assert lifetimes.to_stop(running, None) == ["secure_hdfs", "kdc", "spark_standalone", "yarn"]


def test_a_held_cluster_stops_once_whether_early_or_at_the_end():
    stopped: list[str] = []
    yarn, kdc = lifetimes.held("yarn"), lifetimes.held("kdc")
    for name, held in (("yarn", yarn), ("kdc", kdc)):
        held.__enter__().callback(stopped.append, name)
    lifetimes.stop_unneeded(2)  # the KDC's tests come next: YARN is done
    assert stopped == ["yarn"] and lifetimes.STOPPED_EARLY == {"yarn"}
    yarn.__exit__(None, None, None)  # the session's end: already stopped, not again
    lifetimes.stop_unneeded(None)
    kdc.__exit__(None, None, None)
    assert stopped == ["yarn", "kdc"]


def test_a_test_asking_for_a_stopped_cluster_fails_naming_it():
    lifetimes.STOPPED_EARLY.add("yarn")
    lifetimes.refuse_stopped(["tmp_path", "kdc"])
    with pytest.raises(pytest.fail.Exception, match="yarn was stopped"):
        lifetimes.refuse_stopped(["tmp_path", "yarn"])


def test_only_known_clusters_are_held():
    with pytest.raises(ValueError, match="CLUSTER_GROUPS"):
        with lifetimes.held("zookeeper"):
            pass
