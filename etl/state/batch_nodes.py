"""What a batch's znodes hold: the header, and beside it what grows with the partition count.

A header rewritten at every state change must stay far below ZooKeeper's 1 MB request limit
whatever the number of partitions. So the per-partition maps set at WRITTEN (the last record's
fingerprint and, by event time, the latest event time of each partition) go to compressed chunks
`records-NNNNN` under the batch's znode when there are many, and the header keeps their count;
the Hive partitions a batch by event time touched go to `partitions-NNNNN` the same way. Small
batches keep the maps in the header, as versions before chunks wrote them (and still read them).
The header records the checksum of each chunk beside it (etl.state.chunks), as a plan's node does
for its ranges; a damaged batch is named with how to drop it (drop_batch_remedy).
"""
from __future__ import annotations

import zlib

from kazoo.exceptions import NoNodeError

from etl.model.batch import Batch
from etl.state.chunks import checksums, decode
from etl.state.znodes import dump

INLINE_RECORDS = 1000  # ~80 bytes a partition: up to ~80 KB stays in the header
RECORDS_PER_CHUNK = 2000
PARTITIONS_PER_CHUNK = 5000  # ~60 bytes a touched partition
LEDGER_KEY = "markers"  # Batch.extra's marker ledger (etl.sink.markers.LEDGER_KEY; the state may not import it)
INLINE_UNMARKED = 2000  # ~32 bytes a partition awaiting _SUCCESS: up to ~64 KB stays in the header
UNMARKED_PER_CHUNK = 5000  # etl.state.marker_chunks


def header_bytes(batch: Batch, marker_sums: list[str] | None = None) -> bytes:
    """The header's bytes; with `marker_sums`, the ledger's partitions awaiting _SUCCESS are in
    those chunks (etl.state.marker_chunks), not inline."""
    header = batch.header_json()
    if marker_sums is not None:
        ledger = batch.extra[LEDGER_KEY]
        header["extra"] = {**batch.extra, LEDGER_KEY: {**ledger, "unmarked": []}}
        header["marker_chunks"], header["marker_count"] = marker_sums, len(ledger["unmarked"])
    keys = _record_keys(batch)
    sums = {}
    if len(keys) > INLINE_RECORDS:
        del header["last_records"]
        header.pop("event_high", None)
        header["record_count"] = len(keys)
        sums["records"] = checksums(record_chunks(batch))
    if batch.event_time.partitions_known:
        sums["partitions"] = checksums(partition_chunks(batch))
    if sums:
        header["checksums"] = sums  # of the chunks beside it, checked by every read
    return dump(header)


def has_record_chunks(batch: Batch) -> bool:
    return len(_record_keys(batch)) > INLINE_RECORDS


def record_chunks(batch: Batch) -> list[bytes]:
    """The chunks of per-partition maps; none when they stay in the header."""
    keys = _record_keys(batch)
    if len(keys) <= INLINE_RECORDS:
        return []
    lasts = {key: last.to_json() for key, last in batch.last_records.items()}
    highs = batch.event_time.event_high
    entries = [[k, lasts.get(k), highs.get(k)] for k in keys]
    return [zlib.compress(dump(entries[i:i + RECORDS_PER_CHUNK])) for i in range(0, len(entries), RECORDS_PER_CHUNK)]


def record_chunk_count(header: dict) -> int:
    return -(-header.get("record_count", 0) // RECORDS_PER_CHUNK)


def merge_records(header: dict, chunks: list[list]) -> dict:
    """The header as Batch.from_json reads it, with the per-partition maps from their (decoded)
    chunks."""
    if "record_count" not in header:
        return header
    entries = [e for chunk in chunks for e in chunk]
    return {**header, "last_records": {k: last for k, last, _ in entries if last is not None},
            "event_high": {k: high for k, _, high in entries if high is not None}}


def marker_chunks(batch: Batch) -> list[bytes]:
    """The chunks of the partitions awaiting _SUCCESS; none when they stay in the header."""
    unmarked = ((batch.extra or {}).get(LEDGER_KEY) or {}).get("unmarked") or []
    if len(unmarked) <= INLINE_UNMARKED:
        return []
    return [zlib.compress(dump(unmarked[i:i + UNMARKED_PER_CHUNK]))
            for i in range(0, len(unmarked), UNMARKED_PER_CHUNK)]


def merge_markers(header: dict, chunks: list[list]) -> dict:
    """The header with its ledger's partitions awaiting _SUCCESS back from their (decoded) chunks."""
    if "marker_chunks" not in header:
        return header
    unmarked = [p for chunk in chunks for p in chunk]
    if len(unmarked) != header["marker_count"]:
        raise ValueError(f"it counts {header['marker_count']} partitions awaiting _SUCCESS, its chunks hold "
                         f"{len(unmarked)}")
    extra = header["extra"]
    return {**header, "extra": {**extra, LEDGER_KEY: {**extra[LEDGER_KEY], "unmarked": unmarked}}}


def partition_chunks(batch: Batch) -> list[bytes]:
    touched = batch.event_time.partitions_json()
    return [dump(touched[i:i + PARTITIONS_PER_CHUNK]) for i in range(0, len(touched), PARTITIONS_PER_CHUNK)]


def partition_chunk_count(header: dict) -> int:
    return -(-header["partition_count"] // PARTITIONS_PER_CHUNK) if "partition_count" in header else 0


def ranges_source(client, paths, batch_id: int, remedy: str) -> tuple:
    """Where a batch's ranges are (a function of batch id and index), their checksums (None: a
    plan from before checksums, or a batch planned before plan nodes, whose chunks are its own)
    and the plan node's stat (None without one)."""
    try:
        data, stat = client.get(paths.plan(batch_id))
    except NoNodeError:
        return paths.chunk, None, None
    plan = decode(paths.plan(batch_id), data, None, False, remedy)
    return paths.plan_chunk, plan.get("checksums") if isinstance(plan, dict) else None, stat


def drop_batch_remedy(paths, batch_id: int, state: str | None) -> str:
    """What to do about a damaged batch: restore it, or drop it, which loses nothing because no
    offset moves before a batch commits; `etl verify` then names the files it had written."""
    if state == "COMMITTED":
        why = (f"batch {batch_id} is COMMITTED: its offsets are in the committed snapshot, and dropping it only "
               f"takes it out of `etl history`")
    elif state:
        why = f"batch {batch_id} is {state}, not committed: no offset moved for it, so dropping it loses nothing"
    else:
        why = f"no offset moves before a batch commits, so dropping batch {batch_id} loses no committed offset"
    return (f"Restore the node from a ZooKeeper backup, or drop the batch ({why}): with the job's schedule "
            f"paused, run `deleteall {paths.batch(batch_id)}` and `deleteall {paths.plan(batch_id)}` in "
            f"zkCli.sh, then `etl verify`, move every file it names as `uncovered_file` out of the table, and "
            f"run `etl run` again")


def _record_keys(batch: Batch) -> list[str]:
    return sorted(set(batch.last_records) | set(batch.event_time.event_high))
