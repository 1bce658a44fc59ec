"""Committed offsets as snapshots behind one pointer znode.

ZooKeeper refuses a request over jute.maxbuffer (1 MB by default), so one transaction with a
compare-and-set per partition stops working at a few thousand partitions. Instead, every state
of the committed offsets is an immutable snapshot, `/snapshots/s-N`: its znode holds the topic
ids and counts, its children every partition's CommittedOffset in zlib-compressed chunks. Each
chunk is its own small fenced write, made before anything points to the snapshot, so a crash
leaves only an unreferenced snapshot, which pruning deletes. The snapshot's znode records each
chunk's checksum, checked on every read (etl.state.chunks).

`/committed` names the current snapshot. Whatever moves offsets (a batch's commit, a reset, a
rebind) writes a new snapshot, then moves the pointer in one fenced transaction with
`set_data(version=...)`: the pointer's version is the compare-and-set that the per-partition
znode versions were. A plan records the pointer version it started from (`/plans/<id>`), so a
plan made before any other move of the offsets can no longer commit.
"""
from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field

from kazoo.exceptions import NoNodeError

from etl.errors import StateConflict, StateDamaged
from etl.model.batch import utc_now_iso
from etl.model.identity import Incarnation, RecordFingerprint
from etl.state.chunks import checksums, damaged, decode, read_chunks
from etl.state.session import SessionBound
from etl.state.znodes import CommittedOffset, dump

# ~40-400 bytes a partition before compression (topic names are at most 249 characters): a chunk
# stays below 1 MB even uncompressed.
OFFSETS_PER_CHUNK = 2000


@dataclass(frozen=True)
class CommittedState:
    """The committed offsets and topic ids, and the pointer version they were read at (None:
    no pointer yet, the state was read from the layout before snapshots)."""

    offsets: dict[tuple[str, int], CommittedOffset] = field(default_factory=dict)
    topic_ids: dict[str, str] = field(default_factory=dict)
    version: int | None = None
    snapshot: str | None = None


class SnapshotRecords(SessionBound):
    """The offsets part of the job's state (etl.state.protocols.OffsetPart), on the run's session."""

    _state_cache: tuple | None = None  # ((pointer version, pointer data), CommittedState)

    # -- reading --------------------------------------------------------------------------
    def committed_offsets(self) -> dict[tuple[str, int], CommittedOffset]:
        """Every partition's committed offset; each CommittedOffset's `version` is the pointer's."""
        return dict(self.committed_state().offsets)

    def topic_ids(self) -> dict[str, str]:
        """The topic ids stored at commit, for topics whose broker reported one."""
        return dict(self.committed_state().topic_ids)

    def committed_state(self) -> CommittedState:
        return self._read(self._committed_state, "read committed offsets")

    def pointer_version(self) -> int | None:
        stat = self._read(lambda: self.client.exists(self.paths.committed), "read the committed pointer")
        return None if stat is None else stat.version

    def _committed_state(self) -> CommittedState:
        try:
            data, stat = self.client.get(self.paths.committed)
        except NoNodeError:
            if self.client.exists(self.paths.migrated) is None:
                return self._legacy_state()
            data, stat = self._pointer_beside_the_mark()
        key = (stat.version, data)
        if self._state_cache is not None and self._state_cache[0] == key:
            return self._state_cache[1]  # snapshots never change once written: reread only the pointer
        try:
            name = decode(self.paths.committed, data, None, False, "")["snapshot"]
        except (StateDamaged, TypeError, KeyError):
            raise damaged(self.paths.committed, "does not name a snapshot", self._pointer_gone()) from None
        node, remedy = self.paths.snapshot(name), _snapshot_remedy(self.paths.snapshot(name))
        try:
            data, node_stat = self.client.get(node)
            meta = decode(node, data, None, False, remedy)
            paths = [self.paths.snapshot_chunk(name, i) for i in range(meta["chunks"])]
            chunks = read_chunks(self.client, paths, meta.get("checksums"), True, remedy,
                                 self._must_record_checksums(node_stat))
            offsets = {}
            for path, chunk in zip(paths, chunks):
                offsets.update(_decoded(path, chunk, stat.version, remedy))
            if len(offsets) != meta["count"]:
                raise damaged(node, f"counts {meta['count']} offsets, its chunks hold {len(offsets)}", remedy)
            state = CommittedState(offsets, dict(meta["topic_ids"]), stat.version, name)
        except NoNodeError:
            raise StateConflict(f"snapshot {name}, which {self.paths.committed} names as the committed offsets, is "
                                f"missing or incomplete in ZooKeeper: it was deleted by hand. Nothing was read or "
                                f"written. Restore it from a ZooKeeper backup; the offsets must not be "
                                f"guessed.") from None
        except (TypeError, KeyError, AttributeError) as exc:  # well-formed JSON of another shape
            raise damaged(node, f"is not a snapshot this version wrote ({type(exc).__name__}: {exc})",
                          remedy) from None
        self._state_cache = (key, state)
        return state

    def _pointer_beside_the_mark(self):
        """The pointer, read again: it and `~migrated` are created in one transaction (etl.state.migration),
        so one missing beside the mark was either created since it was first read (a first run's, racing
        this reader) or deleted by hand."""
        try:
            return self.client.get(self.paths.committed)
        except NoNodeError:
            raise StateConflict(self._pointer_gone()) from None

    def _pointer_gone(self) -> str:
        return (f"ZooKeeper has no {self.paths.committed} committed pointer, yet {self.paths.migrated} says this "
                f"job's offsets moved to snapshots: the pointer was deleted by hand. Nothing was read or written, "
                f"so that the job does not load again from the offsets it had before the move. Recreate the "
                f"pointer with the data {{\"snapshot\": \"s-...\"}} naming the snapshot of the last COMMITTED batch "
                f"(`etl history --json` shows it), or a newer one under {self.paths.snapshots} if an offset reset "
                f"or rebind came after that batch (each snapshot's data says why it was written).")

    def _legacy_state(self) -> CommittedState:
        """The offsets as versions before snapshots stored them: a znode per partition under
        `/offsets/<topic>`, whose data is the topic id (etl.state.migration moves them)."""
        try:
            topics = [t for t in self.client.get_children(self.paths.offsets) if not t.startswith("~")]
        except NoNodeError:
            return CommittedState()
        reads, ids = {}, {}
        for topic in topics:
            data, _ = self.client.get(self.paths.topic(topic))
            if data:
                ids[topic] = json.loads(data)["topic_id"]
            for part in self.client.get_children(self.paths.topic(topic)):
                reads[(topic, int(part))] = self.client.get_async(self.paths.offset(topic, int(part)))
        offsets = {}
        for key, read in reads.items():
            data, stat = read.get()
            offsets[key] = CommittedOffset.parse(data, stat.version)
        return CommittedState(offsets, ids)

    def snapshot_base(self, name: str) -> int | None:
        """The pointer version a snapshot was built on; None if it is gone."""
        try:
            data, _ = self._read(lambda: self.client.get(self.paths.snapshot(name)), f"read snapshot {name}")
        except NoNodeError:
            return None
        return json.loads(data)["base"]

    # -- writing --------------------------------------------------------------------------
    def write_snapshot(self, offsets: dict[tuple[str, int], CommittedOffset], topic_ids: dict[str, str],
                       base: int | None, why: str) -> str:
        """Store a snapshot, invisible until a pointer move names it; returns its name."""
        entries = [_encode(key, found) for key, found in sorted(offsets.items())]
        chunks = [zlib.compress(dump(entries[i:i + OFFSETS_PER_CHUNK]))
                  for i in range(0, len(entries), OFFSETS_PER_CHUNK)]
        meta = {"count": len(entries), "chunks": len(chunks), "topic_ids": topic_ids, "base": base,
                "why": why, "at": utc_now_iso(), "checksums": checksums(chunks)}
        self._read(lambda: self.client.ensure_path(self.paths.snapshots), "create the snapshots node")
        txn = self.client.transaction()
        self._fence(txn)
        self._mark_checksummed(txn)
        txn.create(self.paths.snapshot("s-"), dump(meta), sequence=True)
        name = self._commit_fenced(txn, f"start a snapshot ({why})")[-1].rsplit("/", 1)[1]
        self.create_fenced([(self.paths.snapshot_chunk(name, i), c) for i, c in enumerate(chunks)],
                           f"store snapshot {name}")
        return name

    def move_pointer(self, txn, name: str, version: int | None, **why) -> None:
        """Add the pointer's move to `name` to a fenced transaction, over `version` (None: the
        pointer's creation, which fails if another run created it meanwhile)."""
        data = dump({"snapshot": name, "at": utc_now_iso(), **why})
        txn.check(self.paths.snapshot(name), 0)  # the snapshot is still there (its znode is never set)
        if version is None:
            txn.create(self.paths.committed, data)
        else:
            txn.set_data(self.paths.committed, data, version=version)

    def prune_snapshots(self, keep: set[str]) -> None:
        """Delete every snapshot but the pointer's and those in `keep`: older states, and
        snapshots a crash left before any pointer named them."""
        current = self.committed_state().snapshot
        try:
            names = self._read(lambda: self.client.get_children(self.paths.snapshots), "list snapshots")
        except NoNodeError:
            return
        for name in sorted(set(names) - keep - {current}):
            self.delete_fenced(self.paths.snapshot(name), f"delete snapshot {name}")


def _encode(key: tuple[str, int], found: CommittedOffset) -> list:
    last = None if found.last is None else found.last.to_json()
    entry = [key[0], key[1], found.value, found.origin, last, found.max_event_ms, found.active_at]
    if found.incarnation or found.past:  # a recreated topic's; the others' entries are as before incarnations
        entry += [found.incarnation, [i.to_json() for i in found.past]]
    return entry


def _decode(entries: list[list], version: int) -> dict[tuple[str, int], CommittedOffset]:
    return {(topic, partition): CommittedOffset(value, version, origin, RecordFingerprint.from_json(last), high,
                                                active, *_incarnations(more))
            for topic, partition, value, origin, last, high, active, *more in entries}


def _incarnations(more: list) -> tuple[str, tuple[Incarnation, ...]]:
    if not more:
        return "", ()
    tag, past = more
    return str(tag), tuple(Incarnation.from_json(i) for i in past)


def _decoded(path: str, entries, version: int, remedy: str) -> dict[tuple[str, int], CommittedOffset]:
    """A chunk's offsets; one that is JSON of another shape (a chunk from before checksums,
    edited by hand) is damage, named, not a traceback."""
    try:
        return _decode(entries, version)
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise damaged(path, f"does not hold committed offsets ({type(exc).__name__}: {exc})", remedy) from None


def _snapshot_remedy(node: str) -> str:
    return (f"The committed offsets must not be guessed: restore {node} and its children from a ZooKeeper "
            f"backup, byte for byte as they were written, then run `etl verify`")
