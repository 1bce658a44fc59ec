"""Rolling a recorded reset forward: the second half of `etl reset-offsets` (etl.ops.reset).

A reset is written to ZooKeeper as a plan before anything moves, so a run that died half-way
is finished by whoever takes the lock next: `run`, `recover` or `reset-offsets` itself.
"""
from __future__ import annotations

from etl.sink.aside import move_aside
from etl.sink.fs import WarehouseFileSystem
from etl.state.protocols import OperatorPart


def finish_pending_reset(store: OperatorPart, fs: WarehouseFileSystem, out=print) -> None:
    """Complete a reset that was recorded but not finished (its run died between moving its files
    and committing its offsets): the moves are idempotent, the offsets move from the recorded old
    values, and the event is written with them."""
    pending = store.pending_reset()
    if pending is None:
        return
    moves = list(pending.event.moved_aside)
    move_aside(fs, moves)
    store.finish_reset(pending.event, pending.topic_ids)
    out(f"reset {len(pending.event.changes)} offsets and moved {len(moves)} files out of the table; recorded in "
        f"ZooKeeper")
