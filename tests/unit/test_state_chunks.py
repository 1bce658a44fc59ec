"""Checked chunks of the job's state (etl.state.chunks) and the marker ledger's chunks
(etl.state.batch_nodes): what is damage, named with its node, and what still loads unchecked."""
import json
import zlib

import pytest

from etl.errors import EXIT_BATCH_FAILED, StateDamaged
from etl.model.batch import Batch, BatchState, OffsetRange
from etl.state.batch_nodes import INLINE_UNMARKED, header_bytes, marker_chunks, merge_markers
from etl.state.chunks import checksum, decode


def test_garbage_a_crafted_chunk_and_a_chunk_from_before_checksums():
    good = zlib.compress(b'[["t",0,5,0,null,null,null]]')
    crafted = zlib.compress(b'[["t",0,2,0,null,null,null]]')
    assert decode("/job/c", good, checksum(good), True, "do this") == [["t", 0, 5, 0, None, None, None]]
    with pytest.raises(StateDamaged, match=r"node /job/c does not hold what the ETL wrote.*do this") as caught:
        decode("/job/c", crafted, checksum(good), True, "do this")
    assert caught.value.exit_code == EXIT_BATCH_FAILED
    with pytest.raises(StateDamaged, match=r"node /job/c cannot be read \(error: .*do this"):
        decode("/job/c", b"garbage", None, True, "do this")
    assert decode("/job/c", crafted, None, True, "") == [["t", 0, 2, 0, None, None, None]]  # no checksum: as before


def test_a_long_marker_ledger_leaves_the_header_and_comes_back_whole():
    unmarked = [{"dt": f"2021-01-{d:02d}", "hour": f"{h:02d}"} for d in range(1, 29) for h in range(24)] * 4
    assert len(unmarked) > INLINE_UNMARKED
    ledger = {"unmarked": unmarked, "late_count": 1, "late": [{"batch_id": 1}]}
    batch = Batch(1, BatchState.PLANNED, "2026-01-01T00:00:00+00:00", {}, (OffsetRange("t", 0, 0, 1, None),),
                  extra={"markers": ledger, "other": 1})
    chunks = marker_chunks(batch)
    header = json.loads(header_bytes(batch, [checksum(c) for c in chunks]))
    assert header["extra"]["markers"]["unmarked"] == [] and len(header_bytes(batch, [])) < 2000
    back = merge_markers(header, [json.loads(zlib.decompress(c)) for c in chunks])
    assert back["extra"] == {"markers": ledger, "other": 1}
    with pytest.raises(ValueError, match="counts 2688 partitions awaiting _SUCCESS, its chunks hold 2000"):
        merge_markers(header, [json.loads(zlib.decompress(chunks[0]))[:2000]])
