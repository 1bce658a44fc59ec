"""What the lock's and the offsets' znodes hold, and their JSON (compact, keys sorted)."""
from __future__ import annotations

import getpass
import json
import os
import re
import socket
import uuid
from dataclasses import dataclass, fields

from etl.model.batch import utc_now_iso
from etl.model.identity import Incarnation, RecordFingerprint


def dump(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()


# What a YARN NodeManager names a container (CONTAINER_ID in its processes' environment):
# container_[e<epoch>_]<cluster timestamp>_<application>_<attempt>_<container>.
_YARN_CONTAINER = re.compile(r"container_(?:e\d+_)?(\d+)_(\d+)_(\d+)_\d+")


@dataclass(frozen=True)
class YarnAttempt:
    """The YARN application attempt whose ApplicationMaster runs this driver (cluster mode)."""
    application: str
    attempt: int

    @classmethod
    def of_container(cls, container_id: str | None) -> "YarnAttempt | None":
        match = _YARN_CONTAINER.fullmatch(container_id or "")
        if match is None:
            return None
        return cls(f"application_{match[1]}_{match[2]}", int(match[3]))


@dataclass(frozen=True)
class LockHolder:
    host: str
    pid: int
    user: str
    since: str
    run_id: str
    # Set when the driver runs in a YARN container (cluster mode); absent from older runs' records.
    yarn_application: str | None = None
    yarn_attempt: int | None = None

    @classmethod
    def parse(cls, data: bytes) -> "LockHolder":
        """The lock's record; keys this version does not know (a newer version's) are left out."""
        raw = json.loads(data)
        return cls(**{f.name: raw[f.name] for f in fields(cls) if f.name in raw})

    def describe(self) -> str:
        yarn = f", YARN {self.yarn_application} attempt {self.yarn_attempt}" if self.yarn_application else ""
        return f"run {self.run_id} (host {self.host}, pid {self.pid}, user {self.user}{yarn}) since {self.since}"

    def is_earlier_attempt_of(self, other: "LockHolder") -> bool:
        """Whether this holder was an earlier attempt of `other`'s YARN application. YARN starts
        attempt N+1 only once attempt N's ApplicationMaster has died, and in cluster mode that is
        where the driver runs: such a holder is dead, its lock only waits for its session to expire."""
        return (self.yarn_application is not None and self.yarn_application == other.yarn_application
                and self.yarn_attempt is not None and other.yarn_attempt is not None
                and self.yarn_attempt < other.yarn_attempt)


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
    # The topic's incarnation the offset is of ("" the first), and those the partition left, oldest
    # first: `origin` and `value` are the current one's (etl.model.identity).
    incarnation: str = ""
    past: tuple[Incarnation, ...] = ()

    @property
    def incarnations(self) -> tuple[Incarnation, ...]:
        """Every incarnation of the partition the job committed, the current one last."""
        return (*self.past, Incarnation(self.incarnation, self.origin, self.value))

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
    yarn = YarnAttempt.of_container(os.environ.get("CONTAINER_ID"))
    return LockHolder(host=socket.gethostname(), pid=os.getpid(), user=getpass.getuser(),
                      since=utc_now_iso(), run_id=uuid.uuid4().hex[:12],
                      yarn_application=yarn.application if yarn else None, yarn_attempt=yarn.attempt if yarn else None)
