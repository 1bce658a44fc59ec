"""The partitions awaiting `_SUCCESS` (the marker ledger, etl.sink.markers) beside the plan when
they are many.

The ledger lives in the newest batch's header (Batch.extra["markers"]), rewritten at every state
change and marker pass. A backfill by event time over years lists one partition an hour: 43,800
for five years, 1.4 MB inline, past ZooKeeper's 1 MB request limit. Past INLINE_UNMARKED entries
the list goes to compressed chunks under the batch's plan node (which exists before the header,
so a new plan's header can count them), named by their checksum: `plans/<id>/markers-<checksum>`.
A header only ever points to chunks that exist, and a rewrite that changes the list writes new
chunks and leaves the old ones whole until the header after it is written, so a crash between the
chunks and the header leaves a header that still reads whole; chunks referenced by neither the
header being written nor the one it replaces are deleted then. Pruning a plan deletes its chunks.
A batch planned before plan nodes keeps its ledger inline, as before.
"""
from __future__ import annotations

import json

from kazoo.exceptions import NoNodeError

from etl.model.batch import Batch
from etl.state.batch_nodes import header_bytes, marker_chunks
from etl.state.chunks import checksums
from etl.state.session import SessionBound

PREFIX = "markers-"


def chunk_name(checksum: str) -> str:
    return f"{PREFIX}{checksum}"


def header_with_markers(store: SessionBound, batch: Batch) -> bytes:
    """The header's bytes to write for `batch`, its ledger's chunks stored first when it has many."""
    chunks = marker_chunks(batch)
    plan = store.paths.plan(batch.batch_id)
    if not chunks or store._read(lambda: store.client.exists(plan), "look for a batch's plan") is None:
        return header_bytes(batch)
    sums = checksums(chunks)
    names = [chunk_name(s) for s in sums]
    have = {c for c in store._read(lambda: store.client.get_children(plan), "list a plan's chunks")
            if c.startswith(PREFIX)}
    store.create_fenced([(store.paths.marker_chunk(batch.batch_id, name), chunk)
                         for name, chunk in zip(names, chunks) if name not in have],
                        f"store the partitions of batch {batch.batch_id} awaiting _SUCCESS")
    stale = have - set(names) - {chunk_name(s) for s in _referenced(store, batch.batch_id)}
    if stale:
        txn = store.client.transaction()
        store._fence(txn)
        for name in sorted(stale):
            txn.delete(store.paths.marker_chunk(batch.batch_id, name))
        store._commit_fenced(txn, f"delete old chunks of batch {batch.batch_id}'s partitions awaiting _SUCCESS")
    return header_bytes(batch, sums)


def marker_paths(paths, batch_id: int, header: dict) -> tuple[list[str], list[str]]:
    """The chunk nodes a stored header points to, and their checksums."""
    sums = header.get("marker_chunks", [])
    return [paths.marker_chunk(batch_id, chunk_name(s)) for s in sums], sums


def _referenced(store: SessionBound, batch_id: int) -> list[str]:
    """The chunks the header as stored now points to (none before the plan's header exists)."""
    try:
        data, _ = store._read(lambda: store.client.get(store.paths.batch(batch_id)), "read a batch's header")
    except NoNodeError:
        return []
    try:
        return list(json.loads(data).get("marker_chunks", []))
    except (ValueError, AttributeError):  # a damaged header: its reader names it; keep every chunk
        return [c.removeprefix(PREFIX) for c in store.client.get_children(store.paths.plan(batch_id))]
