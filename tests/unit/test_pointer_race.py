"""A reader racing a job's first run: the committed pointer and the `~migrated` mark are created in
one transaction (etl.state.migration), so a reader whose read of the pointer came just before it,
and whose look for the mark just after, has seen the pointer created, not deleted by hand. It
reads the pointer again (the clean clone of 80bf3b3 saw a test's poll of `job_state` fail so)."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from kazoo.exceptions import NoNodeError

from etl.errors import StateConflict
from etl.state.paths import ZkPaths
from etl.state.snapshots import SnapshotRecords

PATHS = ZkPaths("/etl", "job")
SNAPSHOT = json.dumps({"count": 0, "chunks": 0, "topic_ids": {}}).encode()


class Client:
    """The pointer is created between the reader's first read of it and its look for the mark."""

    def __init__(self, created_meanwhile: bool):
        self.created_meanwhile, self.pointer_reads = created_meanwhile, 0

    def get(self, path):
        if path == PATHS.committed:
            self.pointer_reads += 1
            if self.pointer_reads == 1 or not self.created_meanwhile:
                raise NoNodeError()
            return json.dumps({"snapshot": "s-0000000001"}).encode(), SimpleNamespace(version=0)
        if path == PATHS.snapshot("s-0000000001"):
            return SNAPSHOT, SimpleNamespace(version=0)
        raise NoNodeError()

    def exists(self, path):
        return SimpleNamespace(version=0) if path == PATHS.migrated else None


def _records(client: Client) -> SnapshotRecords:
    session = SimpleNamespace(client=client, paths=PATHS, _read=lambda fn, what: fn(),
                              must_record_checksums=lambda stat: False)
    return SnapshotRecords(session)


def test_a_pointer_created_between_the_two_reads_is_read_again():
    client = Client(created_meanwhile=True)
    state = _records(client).committed_state()
    assert client.pointer_reads == 2 and state.snapshot == "s-0000000001" and state.offsets == {}


def test_a_pointer_still_missing_after_the_mark_was_deleted_by_hand():
    with pytest.raises(StateConflict, match="the pointer was deleted by hand"):
        _records(Client(created_meanwhile=False)).committed_state()
