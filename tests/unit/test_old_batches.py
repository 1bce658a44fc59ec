"""Batches stored by earlier versions still load, typed at the boundary: the headers and ranges
of tests/fixtures/batches_by_version.json were written by those versions' own code (each
entry names its commit). A field an older version did not have takes its default; one it did
have keeps its meaning, and writes back as it was stored (with the later fields of its parts
at their defaults, such as a skip's `recreated`)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from etl.job.summary import written_files
from etl.model.batch import Batch, BatchState, DimensionChange, EventTimeRecord, TouchedPartition
from etl.model.identity import RecordFingerprint
from etl.state.offsets_after import offsets_after
from etl.state.snapshots import CommittedState

STORED = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "batches_by_version.json")
                    .read_text())["batches"]


def _id(entry: dict) -> str:
    return f"{entry['version'].split()[0]}-{entry['state']}"


def _within(old, new) -> bool:
    """Whether `new` says all that `old` said: the same values, and maps with more keys at most."""
    if isinstance(old, dict):
        return isinstance(new, dict) and all(key in new and _within(value, new[key]) for key, value in old.items())
    if isinstance(old, list):
        return isinstance(new, list) and len(old) == len(new) and all(map(_within, old, new))
    return old == new and type(old) is type(new)


@pytest.mark.parametrize("stored", STORED, ids=_id)
def test_a_batch_an_earlier_version_stored_loads_and_writes_back_what_it_read(stored):
    batch = Batch.from_json(stored["header"], stored["ranges"])
    assert batch.state is BatchState(stored["state"])
    assert [r.to_json() for r in batch.ranges] == stored["ranges"]
    again = batch.header_json()
    assert _within(stored["header"], again), (stored["header"], again)
    assert Batch.from_json(again, stored["ranges"]) == batch


@pytest.mark.parametrize("stored", STORED, ids=_id)
def test_the_maps_of_a_stored_batch_are_typed_once_it_is_read(stored):
    batch = Batch.from_json(stored["header"], stored["ranges"])
    assert all(isinstance(last, RecordFingerprint) for last in batch.last_records.values())
    counts = [*batch.event_time.event_high.values(), *batch.ignored_fields.values(),
              *(batch.unmatched or {}).values()]
    assert all(type(count) is int for count in counts)
    assert all(isinstance(topic_id, str) for topic_id in batch.topic_ids.values())
    assert all(isinstance(tables, list) for tables in batch.tables.values())


def test_the_last_records_an_earlier_version_stored_reach_the_committed_offsets():
    [stored] = [s for s in STORED if s["state"] == "COMMITTED" and "last_records" in s["header"]][:1]
    batch = Batch.from_json(stored["header"], stored["ranges"])
    offsets, topic_ids = offsets_after(batch, CommittedState())
    assert offsets[("clicks", 0)].last == RecordFingerprint(159, 1763632800000, "00aa11bb22cc33dd")
    assert offsets[("clicks", 0)].value == 160 and topic_ids == {"clicks": "AaIFnTSZfgCuWxfsrPJLjg"}


def test_the_fixtures_span_the_versions_before_each_typed_field():
    keys_by_version = [set(s["header"]) for s in STORED if s["state"] == "COMMITTED"]
    assert "last_records" not in keys_by_version[0] and "tables" in keys_by_version[-1]
    assert len(STORED) == 8


# The partitions a batch by event time records at WRITTEN, as stored in its chunks: before each
# entry counted its files, then with them, and a routed batch's with its table.
TOUCHED = [{"partition": "dt=2026-11-25/hour=10", "rows": 40, "late": 0},
           {"partition": "dt=2026-11-25/hour=11", "rows": 7, "late": 2, "files": 2},
           {"partition": "dt=2026-11-25/hour=11", "table": "clicks", "rows": 5, "late": 0, "files": 1}]
CHANGE = {"dimension": "countries", "pinned": {"path": "/d/c.csv", "bytes": 10, "files": [["/d/c.csv", 10, 1]]},
          "current": None, "at": "2026-11-25T10:00:00+00:00", "by": "run f457 (host vm, pid 1)"}


def test_the_partitions_and_dimension_changes_a_batch_stored_are_typed_and_write_back_as_stored():
    header = {**STORED[-1]["header"], "dimension_changes": [CHANGE]}
    batch = Batch.from_json(header, STORED[-1]["ranges"], TOUCHED)
    assert batch.event_time.partitions == (TouchedPartition("dt=2026-11-25/hour=10", 40, 0, None),
                                           TouchedPartition("dt=2026-11-25/hour=11", 7, 2, 2),
                                           TouchedPartition("dt=2026-11-25/hour=11", 5, 0, 1, "clicks"))
    assert [part.to_json() for part in batch.event_time.partitions] == TOUCHED
    assert batch.dimension_changes == (DimensionChange("countries", CHANGE["pinned"], None, CHANGE["at"],
                                                       CHANGE["by"]),)
    assert batch.header_json()["dimension_changes"] == [CHANGE]
    assert written_files(batch) == 1 + 2 + 1  # an entry from before files were counted is one file


def test_what_an_earlier_version_stored_of_event_time_decodes_into_the_batchs_event_time_record():
    """The header's event_high and the partitions from its chunks, stored as Batch's own fields
    then, are the record's now, and write back where they were."""
    stored = STORED[-1]
    assert "event_high" in stored["header"] and "placement" not in stored["header"]
    batch = Batch.from_json(stored["header"], stored["ranges"], TOUCHED)
    assert batch.event_time == EventTimeRecord({}, tuple(TouchedPartition.from_json(p) for p in TOUCHED),
                                               {"clicks:0": 1763632800000, "clicks:1": 1763632801000})
    again = batch.header_json()
    keys = list(stored["header"])
    keys.insert(keys.index("event_high"), "partition_count")  # the count of the chunks beside it, just before
    assert list(again) == keys
    assert again["event_high"] == stored["header"]["event_high"] and again["partition_count"] == len(TOUCHED)
    assert Batch.from_json(stored["header"], stored["ranges"]).event_time.partitions is None
