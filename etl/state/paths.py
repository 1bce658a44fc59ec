"""Where the job's state lives in ZooKeeper: every znode path is built here.

    <root>/<job>/lock              ephemeral: the run that holds the job
                /owner             who took the lock last (its version fences every write)
                /committed         names the snapshot of the committed offsets; its version is the
                                   compare-and-set every offset move checks (etl.state.snapshots)
                /snapshots/s-N     a snapshot: topic ids and counts; its children: every partition's
                                   committed offset, in compressed chunks
                /offsets/<topic>   before snapshots: the topic's id; its children each partition's
                                   offset. Read once by the migration, then left as they were, with
                                   a child `~migrated` that makes older versions fail (etl.state.migration)
                /plans/<id>        a plan's base (the pointer version it started from); its children:
                                   the plan's ranges, in chunks, written before the batch's header,
                                   and many partitions awaiting _SUCCESS (etl.state.marker_chunks)
                /batches/<id>      a batch's header; its children: for many partitions, each one's last
                                   record and event-time high, in chunks; by event time the partitions
                                   it touched, in chunks (and, for batches planned before snapshots,
                                   the plan's ranges)
                /events/event-N    what operators and skips did (etl.model.events)
                /binding           the table and folders the job writes (etl.model.binding)
                /pending-reset     a reset with files to move (etl.ops.reset)
                /compactions       the last compaction id; its children: compactions under way
                /relocations       where compacted partitions' files are now (etl.model.compaction):
                                   a one-table job's table and the job's rejected table
                /merged/<id>       a switched compaction's merged files that record checksums: kept while
                                   its folder is the partition's current one (etl.state.compaction_records)
                /table-relocations/<table>  the same for one of a routed job's tables, by its
                                   Hive name; absent until a routed table is compacted
                /totals            rows, bytes, ... loaded since the first commit (etl.state.totals)
                /checksummed       the mark that this job's state is checksummed: created with the first
                                   parent this version wrote with its chunks' checksums; a parent
                                   written since without them is refused (etl.state.chunks)
"""
from __future__ import annotations


class ZkPaths:
    def __init__(self, root: str, job: str):
        self.job = f"{root.rstrip('/')}/{job}"
        self.lock = f"{self.job}/lock"
        self.owner = f"{self.job}/owner"
        self.offsets = f"{self.job}/offsets"  # the layout before snapshots (etl.state.migration)
        self.migrated = f"{self.offsets}/~migrated"  # no topic is named so: Kafka's names exclude '~'
        # A child that is no partition number, so that an older version reading offsets fails on it.
        self.migrated_note = f"{self.migrated}/see-committed"
        self.committed = f"{self.job}/committed"
        self.snapshots = f"{self.job}/snapshots"
        self.plans = f"{self.job}/plans"
        self.batches = f"{self.job}/batches"
        self.events = f"{self.job}/events"
        self.event_prefix = f"{self.events}/event-"  # created with sequence=True: ZooKeeper appends N
        self.binding = f"{self.job}/binding"  # the table and folders the job writes (etl.model.binding)
        self.pending_reset = f"{self.job}/pending-reset"  # a reset with files to move (etl.ops.reset)
        self.compactions = f"{self.job}/compactions"
        self.relocations = f"{self.job}/relocations"
        self.merged = f"{self.job}/merged"  # the merged files of switched compactions that carry checksums
        self.table_relocations = f"{self.job}/table-relocations"  # one child per compacted routed table
        self.totals = f"{self.job}/totals"  # moved by each commit (etl.state.totals)
        self.checksummed = f"{self.job}/checksummed"  # the state's parents record checksums (etl.state.chunks)

    @staticmethod
    def child(parent: str, name: str) -> str:
        """A child of `parent` by the name get_children lists (events, compactions, chunks)."""
        return f"{parent}/{name}"

    def topic(self, topic: str) -> str:
        """Holds the topic's id (etl.model.identity) once known; its children hold the offsets."""
        return f"{self.offsets}/{topic}"

    def offset(self, topic: str, partition: int) -> str:
        return f"{self.offsets}/{topic}/{partition}"

    def snapshot(self, name: str) -> str:
        return f"{self.snapshots}/{name}"

    def snapshot_chunk(self, name: str, index: int) -> str:
        return f"{self.snapshots}/{name}/offsets-{index:05d}"

    def plan(self, batch_id: int) -> str:
        return f"{self.plans}/{batch_id:010d}"

    def plan_chunk(self, batch_id: int, index: int) -> str:
        return f"{self.plan(batch_id)}/ranges-{index:05d}"

    def marker_chunk(self, batch_id: int, name: str) -> str:
        """A chunk of the partitions awaiting _SUCCESS, named by its checksum (etl.state.marker_chunks)."""
        return f"{self.plan(batch_id)}/{name}"

    def batch(self, batch_id: int) -> str:
        return f"{self.batches}/{batch_id:010d}"

    def record_chunk(self, batch_id: int, index: int) -> str:
        """A chunk of each partition's last record and event-time high (etl.state.batch_nodes)."""
        return f"{self.batch(batch_id)}/records-{index:05d}"

    def chunk(self, batch_id: int, index: int) -> str:
        """Where batches planned before snapshots keep their ranges (now: plan_chunk)."""
        return f"{self.batch(batch_id)}/ranges-{index:05d}"

    def touched(self, batch_id: int, index: int) -> str:
        """A chunk of the Hive partitions a batch by event time touched (set at WRITTEN)."""
        return f"{self.batch(batch_id)}/partitions-{index:05d}"

    def compaction(self, compaction_id: int) -> str:
        return f"{self.compactions}/{compaction_id:010d}"

    def merged_record(self, compaction_id: int) -> str:
        return f"{self.merged}/{compaction_id:010d}"

    def table_relocation(self, table: str) -> str:
        """A routed table's relocations: Hive names (`[a-z0-9_]`, etl.config.routes) are safe znode names."""
        return f"{self.table_relocations}/{table}"
