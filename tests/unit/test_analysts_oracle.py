"""The oracle of tests/integration/test_analysts_endpoint.py (what an analyst's query may see
while the ETL commits), checked without services on made-up snapshots: it must flag a partial
file, a duplicate and a stray row, or it proves nothing there.
"""
from __future__ import annotations

from collections import Counter


from etl.model.naming import FileRange
from tests.harness.query_views import snapshot_problems


def test_the_oracle_flags_a_partial_file_a_duplicate_and_a_stray_row():
    f1, f2 = FileRange("t", 0, 0, 10), FileRange("t", 0, 10, 20)
    files = {"main": {f1: frozenset(range(10)), f2: frozenset(range(10, 19))}}  # offset 19 was rejected
    whole = Counter(("t", 0, o) for o in range(10))
    assert snapshot_problems({"main": whole}, files) == []
    assert snapshot_problems({"main": whole + Counter(("t", 0, o) for o in range(10, 19))}, files) == []
    partial = whole + Counter(("t", 0, o) for o in range(10, 15))  # what a file written in place shows
    assert snapshot_problems({"main": partial}, files) == ["main: partial file t+0+10+20: 5 of its 9 rows"]
    assert snapshot_problems({"main": whole + Counter({("t", 0, 3): 1})}, files) == ["main: ('t', 0, 3) seen 2 times"]
    assert snapshot_problems({"main": whole + Counter({("t", 0, 19): 1})}, files) == [
        "main: 1 rows in no data file, e.g. [('t', 0, 19)]"]
