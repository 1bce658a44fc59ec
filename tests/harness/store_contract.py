"""The contract of the job's state store: what every part of etl.state.protocols does, written
once and run against each store, so that the in-memory one (tests.harness.memory_store) cannot
drift from ZooKeeper's.

A test class inherits StoreContract and gives it the fixture `stores` (a Stores): the memory
store in tests/unit/test_store_contract_memory.py, ZooKeeper, each test on a fresh root, in
tests/integration/test_store_contract_zookeeper.py.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import pytest

from etl.errors import LockLost, StateConflict
from etl.model.batch import Batch, BatchKind, BatchState, OffsetRange, SkippedRange
from etl.model.binding import Target
from etl.model.compaction import CompactionPlan, CompactionState, InputFile, OutputFile, Relocations, TableKind
from etl.model.events import AcceptedLoss, Bind, OffsetChange, PendingReset, Reset
from etl.model.naming import final_name
from etl.state.protocols import StateStore

AT = "2026-01-01T00:00:00+00:00"
# A compaction's record as versions before merged files' checksums were known to ZooKeeper wrote it.
OLD_RECORD = Path(__file__).resolve().parents[1] / "fixtures" / "compaction_record_before_checksums.json"


@dataclass(frozen=True)
class Stores:
    """Sessions on one job's state: `open()` a run's (connected, lock not taken), `expire(store)`
    its session as ZooKeeper expires one (a long GC pause, a partition)."""

    open: Callable[[], StateStore]
    expire: Callable[[StateStore], None]


def batch(batch_id: int = 1, ranges=(OffsetRange("t", 0, 0, 10, None), OffsetRange("t", 1, 0, 5, None)),
          **more) -> Batch:
    return Batch(batch_id, BatchState.PLANNED, AT, {"dt": "2026-01-01", "hour": "00"}, tuple(ranges), **more)


def committed(store: StateStore, planned: Batch, rows: int = 1) -> Batch:
    """Plan `planned`, then move it through every state to COMMITTED."""
    version = store.batches.write_plan(planned)
    written, version = store.batches.advance(planned, version, BatchState.WRITTEN, rows=rows, rejected=0)
    registered, version = store.batches.advance(written, version, BatchState.REGISTERED)
    return store.batches.commit(registered, version)


def compaction(compaction_id: int = 1, partition: str = "dt=2026-01-01/hour=00", table: TableKind = TableKind.MAIN,
               table_name: str | None = None) -> CompactionPlan:
    return CompactionPlan(compaction_id, table, partition, partition,
                          f"_compacted/{partition}/c{compaction_id:010d}",
                          (InputFile("a.parquet", 10, 2, ((0, 2),)),), (OutputFile("m.parquet", ("a.parquet",)),),
                          AT, "test", table_name=table_name)


def switched(store: StateStore, plan: CompactionPlan) -> CompactionPlan:
    """Store `plan` and move it to SWITCHED, which relocates its partition."""
    version = store.compactions.write_compaction(plan)
    written, version = store.compactions.advance_compaction(plan, version, CompactionState.WRITTEN)
    return store.compactions.advance_compaction(written, version, CompactionState.SWITCHED, switched_at=AT)[0]


def values(store: StateStore) -> dict[tuple[str, int], int]:
    return {key: found.value for key, found in store.offsets.committed_offsets().items()}


TARGET = Target("db", "events", "/warehouse/events", "/warehouse/events_rejected")
OTHER = Target("db", "events2", "/warehouse/events2", "/warehouse/events2_rejected")


class StoreContract:
    """Every test here runs against each store; the subclass provides the `stores` fixture."""

    # -- lock and fencing -----------------------------------------------------------------
    def test_one_holder_at_a_time_and_the_next_after_release(self, stores: Stores):
        first, second = stores.open(), stores.open()
        assert first.session.lock_holder() is None
        assert first.session.acquire_lock() is None
        first.session.assert_lock_held()
        holder = second.session.acquire_lock()
        assert holder is not None and holder.run_id == first.session.me.run_id
        assert second.session.lock_holder() == holder
        with pytest.raises(LockLost):
            second.session.assert_lock_held()
        first.session.release_lock()
        assert second.session.lock_holder() is None
        assert second.session.acquire_lock() is None
        assert first.session.lock_holder().run_id == second.session.me.run_id

    def test_a_run_without_the_lock_writes_nothing(self, stores: Stores):
        store = stores.open()
        with pytest.raises(LockLost):
            store.batches.write_plan(batch())
        with pytest.raises(LockLost):
            store.operator.record_event(AcceptedLoss(AT, "op", "t", 0, 1, 2))
        assert store.batches.batch_ids() == [] and store.operator.events() == []

    def test_an_expired_run_is_fenced_out_and_its_successor_finishes_the_batch(self, stores: Stores):
        zombie = stores.open()
        zombie.session.acquire_lock()
        planned = batch()
        written, version = zombie.batches.advance(planned, zombie.batches.write_plan(planned), BatchState.WRITTEN,
                                                  rows=3)
        registered, version = zombie.batches.advance(written, version, BatchState.REGISTERED)
        stores.expire(zombie)
        successor = stores.open()
        assert successor.session.acquire_lock() is None  # the lock died with the session
        with pytest.raises(LockLost):
            zombie.batches.commit(registered, version)
        with pytest.raises(LockLost):
            zombie.batches.amend(registered, version, extra={"by": "zombie"})
        with pytest.raises(LockLost):
            zombie.session.release_lock()
        assert successor.session.lock_holder().run_id == successor.session.me.run_id
        assert successor.offsets.committed_offsets() == {}
        found, found_version = successor.batches.open_batch()
        assert found.state is BatchState.REGISTERED and found_version == version and found.extra == {}
        successor.batches.commit(found, found_version)
        assert values(successor) == {("t", 0): 10, ("t", 1): 5}

    # -- plans and batch states -----------------------------------------------------------
    def test_a_plan_round_trips_and_is_the_open_batch(self, stores: Stores):
        store = stores.open()
        store.session.acquire_lock()
        assert store.batches.last_batch() is None and store.batches.open_batch() is None
        planned = batch(topic_ids={"t": "id-1"}, extra={"k": "v"})
        assert store.batches.write_plan(planned) == 0
        loaded, version = store.batches.read_batch(1)
        assert (loaded.ranges, loaded.partition_values, loaded.state, loaded.topic_ids, loaded.extra) == \
            (planned.ranges, planned.partition_values, BatchState.PLANNED, {"t": "id-1"}, {"k": "v"})
        assert version == 0 and store.batches.batch_ids() == [1]
        assert store.batches.open_batch() == store.batches.last_batch() == (loaded, 0)

    def test_a_batch_advances_over_its_version_and_no_other(self, stores: Stores):
        store = stores.open()
        store.session.acquire_lock()
        planned = batch()
        version = store.batches.write_plan(planned)
        written, new_version = store.batches.advance(planned, version, BatchState.WRITTEN, rows=7, rejected=1)
        assert new_version == version + 1
        assert store.batches.read_batch(1)[0].state is BatchState.WRITTEN and store.batches.read_batch(1)[0].rows == 7
        with pytest.raises(StateConflict):
            store.batches.advance(written, version, BatchState.REGISTERED)  # a stale version
        with pytest.raises(StateConflict):
            store.batches.advance(written, new_version, BatchState.COMMITTED)  # a skipped state
        amended, amended_version = store.batches.amend(written, new_version, extra={"note": 1})
        assert amended_version == new_version + 1 and amended.state is BatchState.WRITTEN
        assert store.batches.read_batch(1) == (amended, amended_version)

    def test_skipped_ranges_of_a_plan_are_events(self, stores: Stores):
        store = stores.open()
        store.session.acquire_lock()
        store.batches.write_plan(batch(skipped=(SkippedRange("t", 0, 3, 8, 8, 20),)))
        (event,) = store.operator.events()
        assert (event.kind.value, event.topic, event.committed, event.restart_at) == ("skipped", "t", 3, 8)

    # -- committed offsets and the pointer ------------------------------------------------
    def test_a_commit_moves_the_offsets_closes_the_batch_and_counts_it(self, stores: Stores):
        store = stores.open()
        store.session.acquire_lock()
        assert store.offsets.committed_offsets() == {} and store.totals.load_totals()[1] is None
        done = committed(store, batch(topic_ids={"t": "id-1"}), rows=4)
        assert done.state is BatchState.COMMITTED and store.batches.open_batch() is None
        assert store.batches.last_batch()[0].state is BatchState.COMMITTED
        assert values(store) == {("t", 0): 10, ("t", 1): 5} and store.offsets.topic_ids() == {"t": "id-1"}
        totals, version = store.totals.load_totals()
        assert (totals.batches, totals.rows, totals.offsets, version) == (1, 4, 15, 0)
        first_version = store.offsets.committed_offsets()[("t", 0)].version
        committed(store, batch(2, [OffsetRange("t", 0, 10, 12, 10)]))
        assert values(store)[("t", 0)] == 12 and store.offsets.committed_offsets()[("t", 0)].version > first_version
        assert store.totals.load_totals()[0].batches == 2 and store.totals.load_totals()[1] == 1

    def test_a_commit_is_refused_when_an_offset_moved_since_the_plan(self, stores: Stores):
        store = stores.open()
        store.session.acquire_lock()
        committed(store, batch())
        stale = batch(2, ranges=[OffsetRange("t", 0, 3, 12, 3)])  # the plan says 3, the store has 10
        version = store.batches.write_plan(stale)
        written, version = store.batches.advance(stale, version, BatchState.WRITTEN)
        registered, version = store.batches.advance(written, version, BatchState.REGISTERED)
        with pytest.raises(StateConflict, match=r"t\[0\]: plan expects 3, ZooKeeper has 10"):
            store.batches.commit(registered, version)
        assert values(store)[("t", 0)] == 10 and store.batches.open_batch()[0].state is BatchState.REGISTERED

    def test_a_plan_made_before_the_pointer_moved_cannot_commit(self, stores: Stores):
        """A reset, even of another partition, moves the pointer: the plan made before it, and
        the snapshot its move to REGISTERED prepared, are refused at commit."""
        store = stores.open()
        store.session.acquire_lock()
        committed(store, batch())
        stale = batch(2, [OffsetRange("t", 0, 10, 12, 10)])
        version = store.batches.write_plan(stale)
        written, version = store.batches.advance(stale, version, BatchState.WRITTEN, rows=2, rejected=0)
        registered, version = store.batches.advance(written, version, BatchState.REGISTERED)
        assert registered.snapshot
        store.operator.finish_reset(Reset(AT, "op", (OffsetChange("t", 1, 5, 2),)), {})
        with pytest.raises(StateConflict, match="the committed offsets were moved"):
            store.batches.commit(registered, version)
        assert values(store) == {("t", 0): 10, ("t", 1): 2}

    def test_a_repair_batch_moves_no_offset_and_counts_nothing(self, stores: Stores):
        store = stores.open()
        store.session.acquire_lock()
        committed(store, batch())
        committed(store, batch(2, [OffsetRange("t", 0, 0, 10, 10)], kind=BatchKind.REPAIR))
        assert values(store) == {("t", 0): 10, ("t", 1): 5} and store.totals.load_totals()[0].batches == 1

    # -- operator records and events ------------------------------------------------------
    def test_a_reset_is_recorded_pending_then_finished_with_its_event(self, stores: Stores):
        store = stores.open()
        store.session.acquire_lock()
        committed(store, batch())
        reset = Reset(AT, "op", (OffsetChange("t", 0, 10, 2), OffsetChange("u", 0, None, 7)))
        assert store.operator.pending_reset() is None
        store.operator.write_pending_reset(PendingReset(reset, {"u": "id-u"}))
        assert store.operator.pending_reset() == PendingReset(reset, {"u": "id-u"})
        with pytest.raises(StateConflict):
            store.operator.write_pending_reset(PendingReset(reset, {}))
        store.operator.finish_reset(reset, {"u": "id-u"})
        assert store.operator.pending_reset() is None and store.operator.events() == [reset]
        assert values(store) == {("t", 0): 2, ("t", 1): 5, ("u", 0): 7}
        offsets = store.offsets.committed_offsets()
        assert offsets[("t", 0)].origin == 0 and offsets[("u", 0)].origin == 7
        assert store.offsets.topic_ids()["u"] == "id-u"

    def test_a_reset_from_an_offset_that_is_not_there_changes_nothing(self, stores: Stores):
        store = stores.open()
        store.session.acquire_lock()
        committed(store, batch())
        with pytest.raises(StateConflict, match=r"cannot reset t\[0\]"):
            store.operator.finish_reset(Reset(AT, "op", (OffsetChange("t", 0, 9, 2),)), {})
        assert values(store) == {("t", 0): 10, ("t", 1): 5} and store.operator.events() == []

    def test_binding_first_and_rebinding_with_origins_moved(self, stores: Stores):
        store = stores.open()
        store.session.acquire_lock()
        assert store.operator.binding() is None
        store.operator.bind_first(TARGET)
        assert store.operator.binding() == TARGET
        with pytest.raises(StateConflict):
            store.operator.bind_first(OTHER)
        committed(store, batch())
        bind = Bind(AT, "op", OTHER.to_json(), False, TARGET.to_json())
        store.operator.rebind(OTHER, reset_origins=True, event=bind)
        assert store.operator.binding() == OTHER and store.operator.events() == [bind]
        assert {key: (o.value, o.origin) for key, o in store.offsets.committed_offsets().items()} == \
            {("t", 0): (10, 10), ("t", 1): (5, 5)}

    def test_events_keep_their_order(self, stores: Stores):
        store = stores.open()
        store.session.acquire_lock()
        losses = [AcceptedLoss(AT, "op", "t", p, 1, 2) for p in range(3)]
        for loss in losses:
            store.operator.record_event(loss)
        assert store.operator.events() == losses

    # -- compaction records ---------------------------------------------------------------
    def test_a_compaction_takes_the_next_id_and_no_other(self, stores: Stores):
        store = stores.open()
        store.session.acquire_lock()
        assert store.compactions.next_compaction_id() == 1 and store.compactions.open_compactions() == []
        assert store.compactions.write_compaction(compaction(1)) == 0
        assert store.compactions.open_compactions() == [(compaction(1), 0)] \
            and store.compactions.next_compaction_id() == 2
        with pytest.raises(StateConflict):
            store.compactions.write_compaction(compaction(1, "dt=2026-01-01/hour=01"))  # id 1 is taken

    def test_a_switch_moves_the_partition_and_the_id_is_never_reused(self, stores: Stores):
        store = stores.open()
        store.session.acquire_lock()
        plan = compaction(1)
        version = store.compactions.write_compaction(plan)
        written, version = store.compactions.advance_compaction(plan, version, CompactionState.WRITTEN)
        assert store.compactions.relocations().folder(TableKind.MAIN, plan.partition) == plan.partition
        with pytest.raises(StateConflict):
            store.compactions.advance_compaction(written, version - 1, CompactionState.SWITCHED)
        switched, version = store.compactions.advance_compaction(written, version, CompactionState.SWITCHED,
                                                                 switched_at=AT)
        assert store.compactions.relocations().folder(TableKind.MAIN, plan.partition) == plan.target
        assert store.compactions.open_compactions() == [(switched, version)]
        with pytest.raises(StateConflict):
            store.compactions.drop_compaction(switched, version - 1)
        store.compactions.drop_compaction(switched, version)
        assert store.compactions.open_compactions() == [] and store.compactions.next_compaction_id() == 2

    def test_a_switch_records_which_merged_files_carry_checksums_while_their_folder_is_current(self, stores: Stores):
        """What `etl verify --deep` asks, after the plan is gone: a file that must record checksums
        is known from ZooKeeper, not from its own footer. An older version's record (no
        `checksums` key: the stored fixture) leaves none, so its files are checked as before."""
        store = stores.open()
        store.session.acquire_lock()
        old = CompactionPlan.from_json(json.loads(OLD_RECORD.read_text()))
        assert not old.checksums and old.to_json() == json.loads(OLD_RECORD.read_text())  # stored as it was
        plan = switched(store, replace(old, compaction_id=1, target=old.target.replace("c0000000007", "c0000000001")))
        assert store.compactions.checksummed_outputs() == {}
        store.compactions.drop_compaction(plan, store.compactions.open_compactions()[0][1])
        again = switched(store, replace(compaction(2, old.partition), source=plan.target, checksums=True))
        assert store.compactions.checksummed_outputs() == {2: frozenset({"m.parquet"})}
        # The plan is not needed.
        assert stores.open().compactions.checksummed_outputs() == {2: frozenset({"m.parquet"})}
        switched(store, replace(compaction(3, old.partition), source=again.target, checksums=True,
                                outputs=(OutputFile("n.parquet", ("a.parquet",)),)))
        assert store.compactions.checksummed_outputs() == {3: frozenset({"n.parquet"})}  # the replaced folder's is gone
        assert store.compactions.checksummed_outputs([2, 3]) == {3: frozenset({"n.parquet"})} \
            == store.compactions.checksummed_outputs([3])

    def test_a_repair_that_rewrites_a_merged_files_range_takes_it_out_of_its_record(self, stores: Stores):
        """`etl recover` rewrites the range of a merged file moved out by hand: its REPAIR batch's
        file takes the name, and has no checksums. Other merged files stay in the record."""
        store = stores.open()
        store.session.acquire_lock()
        gone, kept = final_name("t", 0, 0, 10), final_name("t", 1, 0, 5)
        switched(store, replace(compaction(1), checksums=True, outputs=(OutputFile(gone, ("a.parquet",)),
                                                                         OutputFile(kept, ("a.parquet",)))))
        committed(store, batch(1))
        store.batches.write_plan(batch(2, (OffsetRange("t", 0, 0, 10, 10),), kind=BatchKind.REPAIR))
        assert store.compactions.checksummed_outputs() == {1: frozenset({kept})}

    def test_a_routed_tables_switch_moves_only_that_tables_relocations(self, stores: Stores):
        store = stores.open()
        store.session.acquire_lock()
        p = "dt=2026-01-01/hour=00"
        rejected = switched(store, compaction(1, p, TableKind.REJECTED))
        orders = switched(store, compaction(2, p, table_name="orders"))
        assert store.compactions.relocations() == Relocations(rejected={p: rejected.target},
                                                              tables={"orders": {p: orders.target}})
        clicks = switched(store, compaction(3, p, table_name="clicks"))
        again = switched(store, compaction(4, "dt=2026-01-01/hour=01", table_name="orders"))
        found = store.compactions.relocations()
        assert found.main == {} and found.rejected == {p: rejected.target}
        assert found.tables == {"clicks": {p: clicks.target},
                                "orders": {p: orders.target, again.partition: again.target}}
        assert stores.open().compactions.relocations() == found

    def test_a_one_table_switch_names_no_routed_table(self, stores: Stores):
        store = stores.open()
        store.session.acquire_lock()
        plan = switched(store, compaction(1))
        assert store.compactions.relocations() == Relocations(main={plan.partition: plan.target})
        assert store.compactions.relocations().tables == {}

    def test_a_bind_to_routes_refiles_the_tables_relocations_in_its_own_step(self, stores: Stores):
        store = stores.open()
        store.session.acquire_lock()
        store.operator.bind_first(TARGET)
        main = switched(store, compaction(1))
        rejected = switched(store, compaction(2, table=TableKind.REJECTED))
        bind = Bind(AT, "op", OTHER.to_json(), False, TARGET.to_json())
        stores.expire(store)
        with pytest.raises(LockLost):
            store.operator.rebind(OTHER, reset_origins=False, event=bind, relocations_of="events")
        after = stores.open()
        assert after.operator.binding() == TARGET and after.compactions.relocations() == \
            Relocations({main.partition: main.target}, {rejected.partition: rejected.target})
        after.session.acquire_lock()
        after.operator.rebind(OTHER, reset_origins=False, event=bind, relocations_of="events")
        assert after.operator.binding() == OTHER and after.operator.events() == [bind]
        assert after.compactions.relocations() == Relocations(rejected={rejected.partition: rejected.target},
                                                  tables={"events": {main.partition: main.target}})

    def test_an_expired_run_cannot_touch_compactions(self, stores: Stores):
        store = stores.open()
        store.session.acquire_lock()
        plan = compaction(1)
        version = store.compactions.write_compaction(plan)
        stores.expire(store)
        with pytest.raises(LockLost):
            store.compactions.advance_compaction(plan, version, CompactionState.WRITTEN)
        with pytest.raises(LockLost):
            store.compactions.write_compaction(compaction(2))
        assert stores.open().compactions.open_compactions() == [(plan, version)]
