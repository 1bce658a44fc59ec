"""A batch's pinned dimension snapshots, and what a difference found on resume means.

The plan pins the snapshot of every dimension the batch uses. A batch resumed with files
still to write compares those pins with the sources as they are now: a dimension that
changed, is gone, or was added to or removed from the config since. Under
[job] on_dimension_change = fail that stops the run (DimensionChanged, exit 1, naming each
dimension and both snapshots); under use_current the new snapshots replace the pins and the
change is recorded in the batch, old and new, with who decided and when.
"""
from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping
from typing import Callable, Protocol

from etl.config import Config, DimensionChangePolicy
from etl.errors import DimensionChanged
from etl.model.batch import Batch, DimensionChange
from etl.rows.dimensions import DimensionLoader, LoadedDimension, Snapshot, describe_change
from etl.state.protocols import WithBatches, WithSession

log = logging.getLogger(__name__)


class PinStore(WithSession, WithBatches, Protocol):
    """What a resume asks of the store: amend the batch, and who this run is."""


def resumed(batch: Batch, version: int, config: Config, dimensions: DimensionLoader, store: PinStore,
            clock: Callable[[], dt.datetime]) -> tuple[Batch, int, dict[str, LoadedDimension]]:
    """Load the dimensions again for the files still to write, and hold them to the pins; a pin
    replaced under use_current is recorded at `clock`'s time (the Job's)."""
    before = pinned(batch)
    current = {d.name: dimensions.snapshot(d) for d in config.dimensions}
    moved = changed(before, current)
    use_current = config.job.on_dimension_change == DimensionChangePolicy.USE_CURRENT
    if moved and not (use_current and all(current.get(name) for name in moved)):
        raise change_error(batch, moved, before, current)  # cheap: before anything is read
    loaded = dimensions.load_all()
    now = {name: d.snapshot for name, d in loaded.items()}
    moved = changed(before, now)  # again: a source may change while it is read
    if moved and not use_current:
        raise change_error(batch, moved, before, now)
    if moved:
        for name in moved:
            log.error("DIMENSION CHANGED since batch %d was planned, finishing it with the current version "
                      "([job] on_dimension_change = use_current): %s: %s", batch.batch_id, name,
                      describe_change(before.get(name), now.get(name)))
        batch, version = store.batches.amend(
            batch, version, dimensions={name: s.to_json() for name, s in now.items()},
            dimension_changes=batch.dimension_changes + change_records(moved, before, now, store.session.me.describe(),
                                                               clock().isoformat(timespec="seconds")))
    return batch, version, loaded


def pinned(batch: Batch) -> dict[str, Snapshot]:
    return {name: Snapshot.from_json(raw) for name, raw in batch.dimensions.items()}


def changed(pins: Mapping[str, Snapshot], current: Mapping[str, Snapshot | None]) -> list[str]:
    """The dimensions whose snapshot now differs from the pin (None: gone or not configured)."""
    return sorted(name for name in pins.keys() | current.keys() if pins.get(name) != current.get(name))


def change_error(batch: Batch, names: list[str], pins: dict, current: dict) -> DimensionChanged:
    details = "; ".join(f"dimension '{name}': {describe_change(pins.get(name), current.get(name))}" for name in names)
    gone = [name for name in names if current.get(name) is None]
    if gone:
        advice = (f"Restore {', '.join(gone)} (a source that is gone cannot be used under any on_dimension_change) "
                  f"and run again")
    else:
        advice = ("Either restore the pinned version and run again, or set [job] on_dimension_change = use_current "
                  "to finish the batch with the current version (the change is recorded in the batch)")
    return DimensionChanged(
        f"batch {batch.batch_id} was planned with other reference data than there is now: {details}. Any of its "
        f"files written before the crash used the pinned version; finishing it with another would mix two "
        f"versions in one batch. {advice}. The batch stays {batch.state.value}; nothing was committed")


def change_records(names: list[str], pins: dict, now: dict, by: str, at: str) -> tuple[DimensionChange, ...]:
    """What the batch keeps about pins replaced under use_current."""
    return tuple(DimensionChange(name, pins[name].to_json() if name in pins else None,
                                 now[name].to_json() if name in now else None, at, by) for name in names)
