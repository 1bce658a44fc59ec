"""The job lock's record: which YARN attempt holds it, and what older and newer records parse to."""
import json

import pytest

from etl.state.znodes import LockHolder, YarnAttempt, dump


@pytest.mark.parametrize(("container", "expected"), [
    ("container_1795672377170_0001_02_000001", YarnAttempt("application_1795672377170_0001", 2)),
    ("container_e17_1410901177871_0123_01_000005", YarnAttempt("application_1410901177871_0123", 1)),
    (None, None),
    ("", None),
    ("container_1795672377170_0001_02", None),  # not a container id: no attempt, never a guess
    ("application_1795672377170_0001", None),
])
def test_the_yarn_attempt_comes_from_the_container_id(container, expected):
    assert YarnAttempt.of_container(container) == expected


def holder(application=None, attempt=None) -> LockHolder:
    return LockHolder("h", 1, "etl", "2026-11-26T00:00:00+00:00", "r1", application, attempt)


APP = "application_1795672377170_0001"


@pytest.mark.parametrize(("earlier", "later", "expected"), [
    (holder(APP, 1), holder(APP, 2), True),
    (holder(APP, 2), holder(APP, 2), False),  # the same attempt: alive as far as anyone knows
    (holder(APP, 2), holder(APP, 1), False),
    (holder("application_1795672377170_0002", 1), holder(APP, 2), False),
    (holder(), holder(APP, 2), False),  # a run outside YARN (or of an older version)
    (holder(APP, 1), holder(), False),
])
def test_only_an_earlier_attempt_of_the_same_application_counts_as_dead(earlier, later, expected):
    assert earlier.is_earlier_attempt_of(later) is expected


def test_records_of_older_and_newer_versions_parse():
    older = {"host": "h", "pid": 1, "user": "etl", "since": "2026-11-26T00:00:00+00:00", "run_id": "r1"}
    assert LockHolder.parse(dump(older)) == holder()
    newer = {**older, "yarn_application": APP, "yarn_attempt": 3, "a_later_key": "ignored"}
    assert LockHolder.parse(json.dumps(newer).encode()) == holder(APP, 3)
    assert "YARN application_1795672377170_0001 attempt 3" in holder(APP, 3).describe()
