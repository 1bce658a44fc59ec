"""What a batch's and a snapshot's znodes hold round-trips, and the header stays small whatever
the partition count (etl.state.batch_nodes, etl.state.snapshots)."""
import json
import zlib

from etl.model.batch import Batch, BatchState, EventTimeRecord, OffsetRange
from etl.model.identity import RecordFingerprint
from etl.state.batch_nodes import INLINE_RECORDS, header_bytes, merge_records, record_chunk_count, record_chunks
from etl.state.snapshots import _decode, _encode
from etl.state.znodes import CommittedOffset


def batch_of(n: int) -> Batch:
    ranges = tuple(OffsetRange("t", p, 0, 3, None) for p in range(n))
    return Batch(1, BatchState.WRITTEN, "2026-01-01T00:00:00+00:00", {"dt": "2026-01-01", "hour": "00"}, ranges,
                 last_records={f"t:{p}": RecordFingerprint(2, 1767225600000 + p, f"{p:016x}") for p in range(n)},
                 event_time=EventTimeRecord(event_high={f"t:{p}": 1767225600000 + p for p in range(0, n, 2)}))


def read_back(batch: Batch) -> Batch:
    header = json.loads(header_bytes(batch))
    chunks = record_chunks(batch)
    assert len(chunks) == record_chunk_count(header)
    decoded = [json.loads(zlib.decompress(chunk)) for chunk in chunks]
    return Batch.from_json(merge_records(header, decoded), [r.to_json() for r in batch.ranges])


def test_a_small_batch_keeps_its_per_partition_maps_in_the_header():
    batch = batch_of(INLINE_RECORDS)
    assert record_chunks(batch) == [] and "last_records" in json.loads(header_bytes(batch))
    assert read_back(batch) == batch


def test_a_large_batch_keeps_them_in_chunks_and_its_header_stays_small():
    batch = batch_of(50000)
    assert len(header_bytes(batch)) < 2000
    assert max(len(c) for c in record_chunks(batch)) < 200_000
    assert read_back(batch) == batch


def test_a_snapshot_entry_round_trips_every_field_of_a_committed_offset():
    found = {("t", 0): CommittedOffset(10, 0, 2, RecordFingerprint(9, 1767225600000, "00aa"), 1767225600123,
                                       "2026-01-01T00:00:00+00:00"),
             ("u", 3): CommittedOffset(7, 0)}
    raw = zlib.compress(json.dumps([_encode(k, v) for k, v in found.items()]).encode())
    assert _decode(json.loads(zlib.decompress(raw)), 0) == found
