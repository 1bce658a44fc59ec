"""Compactions in ZooKeeper: the plan of each one under way, and where compacted partitions live.

A part of ZkStateStore (etl.state.store), like etl.state.records: every write is fenced by the
job lock (etl.state.session). `/compactions` holds the last id handed out, so that a compaction's folder, named by
its id, is never reused, even after a plan is rolled back; its children are the plans under way.
`/relocations` (zlib-compressed JSON: a year of hourly partitions is ~9,000 entries) changes only
in the transaction that marks a compaction SWITCHED, so ZooKeeper's view of where a partition's
files are moves with the metastore's, and batches write where Hive reads.

A routed job's tables each have their own znode, `/table-relocations/<table>` (zlib JSON
`{"partitions": {…}}`), set by the SWITCHED of a plan that names the table: each grows like a
one-table job's `/relocations` (about 71 KB a table-year), far below ZooKeeper's 1 MB a znode,
and a switch rewrites its own table's only. `/relocations` keeps a one-table job's table and the
job's rejected table, which every route shares; a one-table job never creates the other.

A plan outlives its compaction only as `/merged/<id>`: the names of its merged files, when its
record says they carry checksums (CompactionPlan.checksums). It is created by the SWITCHED
transaction, which deletes the one of the folder it replaces, so there is one per compacted
partition. `etl verify --deep` asks it which files must hold `etl.checksums`: the file being
checked cannot say so itself, since a file rewritten without the key would then pass unchecked.
"""
from __future__ import annotations

import json
import zlib
from typing import Collection

from kazoo.exceptions import NoNodeError

from etl.errors import StateConflict
from etl.model.compaction import CompactionPlan, CompactionState, Relocations, compaction_of_folder
from etl.model.naming import name_stem
from etl.state.chunks import damaged
from etl.state.session import SessionBound
from etl.state.znodes import dump


class CompactionRecords(SessionBound):
    """The compaction part of the job's state (etl.state.protocols.CompactionPart)."""

    def relocations(self) -> Relocations:
        own = self._relocations()[0]
        try:
            names = self._read(lambda: self.client.get_children(self.paths.table_relocations),
                               "list the tables' relocations")
        except NoNodeError:
            return own  # a one-table job, or no routed table compacted yet
        tables = {name: self._table_relocations(name)[0] for name in sorted(names)}
        return Relocations(own.main, own.rejected, tables)

    def _relocations(self) -> tuple[Relocations, int | None]:
        """With the znode's version; None when no partition was ever compacted."""
        try:
            data, stat = self._read(lambda: self.client.get(self.paths.relocations), "read relocations")
        except NoNodeError:
            return Relocations(), None
        return Relocations.from_json(json.loads(zlib.decompress(data))), stat.version

    def _table_relocations(self, table: str) -> tuple[dict[str, str], int | None]:
        """A routed table's map, with its znode's version; None when it has none."""
        try:
            data, stat = self._read(lambda: self.client.get(self.paths.table_relocation(table)),
                                    f"read the relocations of table {table}")
        except NoNodeError:
            return {}, None
        return dict(json.loads(zlib.decompress(data))["partitions"]), stat.version

    def open_compactions(self) -> list[tuple[CompactionPlan, int]]:
        """The compactions under way, oldest first, each with its znode version."""
        try:
            names = self._read(lambda: self.client.get_children(self.paths.compactions), "list compactions")
        except NoNodeError:
            return []
        found = []
        for name in sorted(names):
            data, stat = self._read(lambda n=name: self.client.get(self.paths.child(self.paths.compactions, n)),
                                    "read a compaction")
            found.append((CompactionPlan.from_json(json.loads(data)), stat.version))
        return found

    def next_compaction_id(self) -> int:
        try:
            data, _ = self._read(lambda: self.client.get(self.paths.compactions), "read the last compaction id")
        except NoNodeError:
            return 1
        return int(data or 0) + 1

    def write_compaction(self, plan: CompactionPlan) -> int:
        """Store a PLANNED compaction and take its id, in one fenced transaction."""
        self._read(lambda: self.client.ensure_path(self.paths.compactions), "create the compactions node")
        txn = self.client.transaction()
        self._fence(txn)
        txn.set_data(self.paths.compactions, str(plan.compaction_id).encode(),
                     version=self._last_id_version(plan.compaction_id - 1))
        txn.create(self.paths.compaction(plan.compaction_id), dump(plan.to_json()))
        self._commit_fenced(txn, f"store the plan of compaction {plan.compaction_id}")
        return 0

    def _last_id_version(self, expected: int) -> int:
        data, stat = self._read(lambda: self.client.get(self.paths.compactions), "read the last compaction id")
        if int(data or 0) != expected:
            raise StateConflict(f"compaction id {expected + 1} was taken meanwhile")
        return stat.version

    def advance_compaction(self, plan: CompactionPlan, version: int, to: CompactionState,
                           **changes) -> tuple[CompactionPlan, int]:
        """Move a compaction forward; to SWITCHED together with the partition's new folder."""
        moved = plan.advanced(to, **changes)
        txn = self.client.transaction()
        self._fence(txn)
        if to is CompactionState.SWITCHED:
            self._relocate(txn, moved)
            self._record_merged(txn, moved)
        txn.set_data(self.paths.compaction(plan.compaction_id), dump(moved.to_json()), version=version)
        results = self._commit_fenced(txn, f"move compaction {plan.compaction_id} to {to.value}")
        return moved, results[-1].version

    def _record_merged(self, txn, plan: CompactionPlan) -> None:
        """Add to the SWITCHED transaction: the plan's merged files, if they carry checksums, and
        the deletion of the record of the folder it replaces (no longer read by any query)."""
        replaced = compaction_of_folder(plan.source)
        if replaced is not None and self._read(lambda: self.client.exists(self.paths.merged_record(replaced)),
                                               "look for the replaced folder's merged files") is not None:
            txn.delete(self.paths.merged_record(replaced))
        if plan.checksums:
            self._read(lambda: self.client.ensure_path(self.paths.merged), "create the merged files' node")
            txn.create(self.paths.merged_record(plan.compaction_id),
                       dump({"partition": plan.partition, "table": plan.table.value, "table_name": plan.table_name,
                             "folder": plan.target, "outputs": [o.name for o in plan.outputs]}))

    def checksummed_outputs(self, ids: Collection[int] | None = None) -> dict[int, frozenset[str]]:
        """By compaction id (every one, or those of `ids` that have one), the names of the merged
        files in its folder that record checksums."""
        return self._read(lambda: self._checksummed_outputs(ids), "read the merged files' records")

    def _checksummed_outputs(self, ids: Collection[int] | None) -> dict[int, frozenset[str]]:
        if ids is None:
            try:
                ids = [int(name) for name in self.client.get_children(self.paths.merged)]
            except NoNodeError:
                return {}
        reads = {key: self.client.get_async(self.paths.merged_record(key)) for key in ids}
        found = {}
        for key, read in sorted(reads.items()):
            try:
                found[key] = frozenset(str(name) for name in json.loads(read.get()[0])["outputs"])
            except NoNodeError:
                continue  # none (an older version's compaction), or replaced meanwhile by a later one
            except (ValueError, KeyError, TypeError) as exc:  # not JSON, or JSON of another shape
                raise damaged(self.paths.merged_record(key), f"is not a record of merged files this version wrote "
                              f"({type(exc).__name__}: {exc})", "Restore it from a ZooKeeper backup") from None
        return found

    def forget_rewritten(self, txn, stems: set[str]) -> None:
        """Add to a fenced transaction (a REPAIR batch's plan): the files named by `stems` (their
        ranges' names without the format's extension, FileRange.stem) taken out of every merged
        files' record that lists them. A REPAIR writes a range no file holds, so a merged file of
        that name is gone (moved out by hand): the batch file taking its name has no checksums."""
        for key, outputs in self.checksummed_outputs().items():
            if {name_stem(name) for name in outputs} & stems:
                data, stat = self._read(lambda k=key: self.client.get(self.paths.merged_record(k)),
                                        f"read compaction {key}'s merged files")
                record = json.loads(data)
                record["outputs"] = [name for name in record["outputs"] if name_stem(name) not in stems]
                txn.set_data(self.paths.merged_record(key), dump(record), version=stat.version)

    def _relocate(self, txn, plan: CompactionPlan) -> None:
        """The partition's new folder, and its rollups' partials partitions' (folded with it)."""
        for fold in plan.partials:
            folders, version = self._table_relocations(fold.table)
            self._set_table_relocations(txn, fold.table, {**folders, plan.partition: plan.target}, version)
        if plan.table_name is not None:
            folders, version = self._table_relocations(plan.table_name)
            self._set_table_relocations(txn, plan.table_name, {**folders, plan.partition: plan.target}, version)
            return
        current, version = self._relocations()
        self._set_relocations(txn, current.moved(plan.table, plan.partition, plan.target), version)

    def _set_relocations(self, txn, relocations: Relocations, version: int | None) -> None:
        data = zlib.compress(dump(relocations.to_json()))
        if version is None:
            txn.create(self.paths.relocations, data)
        else:
            txn.set_data(self.paths.relocations, data, version=version)

    def _set_table_relocations(self, txn, table: str, folders: dict[str, str], version: int | None) -> None:
        data = zlib.compress(dump({"partitions": dict(sorted(folders.items()))}))
        if version is None:
            # The parent has no data and is never deleted: created beforehand, like /compactions.
            self._read(lambda: self.client.ensure_path(self.paths.table_relocations),
                       "create the tables' relocations node")
            txn.create(self.paths.table_relocation(table), data)
        else:
            txn.set_data(self.paths.table_relocation(table), data, version=version)

    def adopt(self, txn, table: str) -> None:
        """Add to a fenced transaction (a one-table job's bind to routes): its table's relocations
        re-filed under `table`, merged over any there, and `/relocations` keeping only the rejected
        table's. Nothing is added when the table has none."""
        current, version = self._relocations()
        if not current.main:
            return
        folders, table_version = self._table_relocations(table)
        self._set_table_relocations(txn, table, {**folders, **current.main}, table_version)
        self._set_relocations(txn, Relocations(rejected=current.rejected), version)

    def drop_compaction(self, plan: CompactionPlan, version: int) -> None:
        """Forget a finished (or rolled back) compaction."""
        txn = self.client.transaction()
        self._fence(txn)
        txn.delete(self.paths.compaction(plan.compaction_id), version=version)
        self._commit_fenced(txn, f"finish compaction {plan.compaction_id}")
