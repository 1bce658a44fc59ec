"""Chunks of the job's state, checked on read: what grows with the partition count (a snapshot's
offsets, a plan's ranges, a batch's per-partition maps and the partitions awaiting `_SUCCESS`)
is stored as child znodes of a parent that counts them, and that parent also records the SHA-256
of each chunk's bytes (checksum), written in the same step as the count and before the chunks. A read
checks each chunk against its checksum, so that a chunk holding garbage, a missing one, and one
crafted well-formed with other offsets all stop the command with StateDamaged naming the node
and what to do, instead of a traceback or, worse, loading silently.

Backward compatibility: a parent written before checksums has no `checksums` list; its chunks
load unchecked, as they did (they are still decoded with care: garbage is named, not a
traceback). The first parent this version writes marks the job's root (`<job>/checksummed`,
etl.state.session) in the same transaction; a parent without the list written (created or last
set) at or after the mark's zxid is refused, so removing a parent's list does not turn its chunks
into unchecked ones: the edit itself is a write after the mark.
"""
from __future__ import annotations

import hashlib
import json
import zlib

from kazoo.exceptions import NoNodeError

from etl.errors import StateDamaged

DAMAGE_DOC = "docs/operating.md, \"Damage in ZooKeeper\""


def checksum(data: bytes) -> str:
    """The first 128 bits of the SHA-256 of a chunk's bytes, in hex: a header with a checksum per
    chunk stays small at a million partitions (500 chunks), and 128 bits leave no chance to luck."""
    return hashlib.sha256(data).hexdigest()[:32]


def checksums(chunks: list[bytes]) -> list[str]:
    return [checksum(chunk) for chunk in chunks]


def read_chunks(client, paths: list[str], expected: list[str] | None, compressed: bool, remedy: str,
                required: bool = False) -> list:
    """The decoded JSON of each chunk, read together; each checked against `expected` (None: a
    parent from before checksums, refused when `required`: it was written since the job's root was
    marked checksummed). Any damage raises StateDamaged naming the node and `remedy`."""
    if expected is None and required and paths:
        raise damaged(paths[0].rsplit("/", 1)[0], "records no checksums of its chunks, yet it was written after "
                      "the job's root was marked as holding checksummed state (its `checksums` were removed by hand), "
                      "so its chunks cannot be trusted", remedy)
    if expected is not None and len(expected) != len(paths):
        raise damaged(paths[0].rsplit("/", 1)[0], f"records {len(expected)} chunk checksums for {len(paths)} "
                      f"chunks", remedy)
    reads = [client.get_async(path) for path in paths]
    decoded = []
    for index, (path, read) in enumerate(zip(paths, reads)):
        try:
            data, _ = read.get()
        except NoNodeError:
            raise damaged(path, "is missing", remedy) from None
        decoded.append(decode(path, data, None if expected is None else expected[index], compressed, remedy))
    return decoded


def decode(path: str, data: bytes, expected: str | None, compressed: bool, remedy: str):
    if expected is not None and checksum(data) != expected:
        raise damaged(path, f"does not hold what the ETL wrote: the SHA-256 of its bytes is not the checksum "
                      f"recorded with it ({expected[:16]}...)", remedy)
    try:
        return json.loads(zlib.decompress(data) if compressed else data)
    except (zlib.error, ValueError) as exc:  # json's JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise damaged(path, f"cannot be read ({type(exc).__name__}: {exc})", remedy) from None


def damaged(path: str, what: str, remedy: str) -> StateDamaged:
    return StateDamaged(f"the job's state in ZooKeeper is damaged: node {path} {what}. Nothing was changed. "
                        f"{remedy} ({DAMAGE_DOC})")
