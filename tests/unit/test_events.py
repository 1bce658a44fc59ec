"""The one codec of recorded events (etl.model.events): what earlier versions wrote reads back
the same, and writes back byte for byte; a kind this version does not know is kept."""
from __future__ import annotations

import pytest

from etl.model import events
from etl.model.batch import SkippedRange

STORED_BY_EARLIER_VERSIONS = [
    {"kind": "skipped", "batch_id": 3, "at": "2026-11-20T10:00:00+00:00", "topic": "t", "partition": 1,
     "committed": 5, "restart_at": 8, "low": 8, "high": 20, "recreated": ""},
    {"kind": "reset", "at": "2026-11-20T10:00:00+00:00", "user": "ops", "moved_aside": [["/w/a", "/w/_aside/a"]],
     "changes": [{"topic": "t", "partition": 0, "old": 10, "new": 4}, {"topic": "t", "partition": 1, "old": None,
                                                                       "new": 7}]},
    {"kind": "accepted_loss", "at": "2026-11-20T10:00:00+00:00", "user": "ops", "topic": "t", "partition": 2,
     "committed": 3, "restart_at": 9},
    {"kind": "moved_aside", "at": "2026-11-20T10:00:00+00:00", "user": "ops", "by": "etl recover",
     "moves": [["/w/b", "/w/_aside/b"]]},
    {"kind": "bind", "at": "2026-11-20T10:00:00+00:00", "user": "ops", "data_moved": False, "from": None,
     "to": {"database": "db", "table": "t", "location": "file:///w/db.db/t",
            "rejected_location": "file:///w/db.db/t_rejected"}},
    {"kind": "from_a_newer_version", "anything": [1, 2]},
]


@pytest.mark.parametrize("stored", STORED_BY_EARLIER_VERSIONS, ids=lambda s: s["kind"])
def test_stored_events_read_back_and_write_back_unchanged(stored):
    event = events.from_json(stored)
    assert events.to_json(event) == stored
    assert event.describe()


def test_only_recorded_moves_explain_a_gap():
    parsed = [events.from_json(s) for s in STORED_BY_EARLIER_VERSIONS]
    # a reset from no committed offset moves nothing that was loaded
    assert events.explained_jumps(parsed) == {("t", 1, 5, 8), ("t", 0, 10, 4), ("t", 2, 3, 9)}


def test_a_skip_is_recorded_with_its_batch():
    skipped = SkippedRange("t", 1, 5, 8, 8, 20)
    assert events.to_json(events.Skipped.of(3, "2026-11-20T10:00:00+00:00", skipped)) == STORED_BY_EARLIER_VERSIONS[0]


def test_a_pending_reset_keeps_the_layout_a_crashed_older_run_left():
    stored = {"changes": STORED_BY_EARLIER_VERSIONS[1]["changes"], "event": STORED_BY_EARLIER_VERSIONS[1],
              "topic_ids": {"t": None}}
    pending = events.PendingReset.from_json(stored)
    assert pending.event.changes[1] == events.OffsetChange("t", 1, None, 7)
    assert pending.to_json() == stored


def test_a_damaged_event_is_kept_but_explains_no_gap():
    damaged = {"kind": "accepted_loss", "at": "2026-11-20T10:00:00+00:00", "topic": "t", "partition": 2}
    event = events.from_json(damaged)
    assert isinstance(event, events.UnknownEvent) and events.to_json(event) == damaged
    assert events.explained_jumps([event]) == set()
