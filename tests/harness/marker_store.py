"""A store holding only what etl.sink.markers.SuccessMarkers asks of ZooKeeper, for the Spark-free
tests of the markers: the newest batch with its version, and the fenced amend of its extra."""
from __future__ import annotations

from dataclasses import replace

from etl.model.batch import Batch


class _Holder:
    def describe(self) -> str:
        return "host:1"


class MarkerStore:
    """The newest batch and its version, as ZooKeeper holds them; amend is the fenced update."""

    me = _Holder()

    def __init__(self):
        self.newest: tuple[Batch, int] | None = None

    @property
    def session(self) -> "MarkerStore":  # each part the markers ask for is this one object
        return self

    batches = offsets = session

    def last_batch(self):
        return self.newest

    def committed_offsets(self):
        return {}

    def amend(self, batch: Batch, version: int, extra: dict):
        assert self.newest == (batch, version), "amended a batch that is not the newest as read"
        self.newest = (replace(batch, extra=extra), version + 1)
