"""What the lock's and the offsets' znodes hold, and their JSON (compact, keys sorted)."""
from __future__ import annotations

import getpass
import json
import os
import socket
import uuid
from dataclasses import dataclass

from etl.model.batch import utc_now_iso
from etl.model.identity import RecordFingerprint


def dump(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()


@dataclass(frozen=True)
class LockHolder:
    host: str
    pid: int
    user: str
    since: str
    run_id: str

    def describe(self) -> str:
        return f"run {self.run_id} (host {self.host}, pid {self.pid}, user {self.user}) since {self.since}"


@dataclass(frozen=True)
class CommittedOffset:
    """A partition's committed offset, as stored in its znode, with what verify and the
    topic-identity check need: where the job started reading the partition (`origin`: the files
    must cover [origin, value) but for recorded skips and resets) and the last record loaded."""

    value: int
    version: int
    origin: int | None = None  # None: committed by a version that did not record it
    last: RecordFingerprint | None = None
    # By event time, for the watermark (etl.sink.markers): the latest event time committed, and
    # when a batch last committed new records of the partition.
    max_event_ms: int | None = None
    active_at: str | None = None

    def to_bytes(self) -> bytes:
        raw = {"offset": self.value, "origin": self.origin, "last": None if self.last is None else self.last.to_json()}
        if self.max_event_ms is not None or self.active_at is not None:
            raw.update(max_event_ms=self.max_event_ms, active_at=self.active_at)
        return dump(raw)

    @classmethod
    def parse(cls, data: bytes, version: int) -> "CommittedOffset":
        raw = json.loads(data)
        if isinstance(raw, int):  # the first format: the offset alone
            return cls(raw, version)
        return cls(int(raw["offset"]), version, raw.get("origin"), RecordFingerprint.from_json(raw.get("last")),
                   raw.get("max_event_ms"), raw.get("active_at"))


def this_run() -> LockHolder:
    return LockHolder(host=socket.gethostname(), pid=os.getpid(), user=getpass.getuser(),
                      since=utc_now_iso(), run_id=uuid.uuid4().hex[:12])
