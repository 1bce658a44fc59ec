"""The commands' decisions before they touch data, on the in-memory store
(tests.harness.memory_store) and a local folder, handed to the command's context (etl.context):
who holds the lock, an open batch, the binding; and what `etl run --dry-run` shows of an open
batch. No ZooKeeper, Kafka or Spark: the config names closed ports, and none of these paths
starts Spark.

The same refusals end to end, through `etl` and the real services, stay in
tests/integration (test_compaction.py, test_operator_mistakes.py, test_exit_codes_stack.py)."""
from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from etl.config import load_config
from etl.context.command import CommandContext
from etl.context.job import JobContext
from etl.compaction.tables import ONE_TABLE, CompactedTable
from etl.errors import (EXIT_BATCH_FAILED, EXIT_OK, EXIT_USAGE, ConfigError, LockHeld, Refused, RefusedUntilDone,
                        StateConflict)
from etl.job.observer import JobObserver
from etl.model.batch import OffsetRange
from etl.model.binding import Target
from etl.model.compaction import TableKind
from etl.model.route_binding import RouteBinding
from etl.ops.acting import Act
from etl.ops.compact import CompactOptions, compact_in, compaction_tables
from etl.ops.dry_run import preview
from etl.ops.history import collect_history
from etl.ops.rebind import BindOptions, bind_in
from etl.ops.recovery import RecoverOptions, recover_in
from etl.ops.reset import ResetOptions, reset_in
from etl.hive.jvm_launch import EarlyJvm
from etl.hive.spark import EarlyLaunch, context_settings
from etl.ops.run import run_in
from etl.sink.fs import LocalFileSystem
from tests.harness.config_file import minimal_ini, routed_ini
from tests.harness.memory_store import MemoryStore
from tests.harness.paths import EVENTS_SCHEMA
from tests.harness.ports import free_port
from tests.harness.store_contract import OTHER, batch, committed, values

EXECUTE_BIND = BindOptions(Act.EXECUTE)
EXECUTE_RECOVER = RecoverOptions(Act.EXECUTE)
EXECUTE_RESET = ResetOptions("earliest", Act.EXECUTE)


@pytest.fixture
def config(tmp_path):
    ini = minimal_ini(EVENTS_SCHEMA).replace("hosts = 127.0.0.1:2181", f"hosts = 127.0.0.1:{free_port()}")
    ini = ini.replace("bootstrap.servers = 127.0.0.1:9092", f"bootstrap.servers = 127.0.0.1:{free_port()}")
    ini = ini.replace("url = file:///tmp/w", f"url = file://{tmp_path}/w")
    (tmp_path / "w").mkdir()
    (tmp_path / "job.ini").write_text(ini)
    return load_config(tmp_path / "job.ini")


@pytest.fixture
def store():
    return MemoryStore()


def context(config, store, kind=CommandContext):
    return kind(config, store=store, fs=LocalFileSystem())


def held_by_another(store: MemoryStore) -> MemoryStore:
    other = store.another_run()
    assert other.session.acquire_lock() is None
    return other


def with_open_batch(store: MemoryStore) -> None:
    store.session.acquire_lock()
    store.batches.write_plan(batch())
    store.session.release_lock()


# -- etl compact ----------------------------------------------------------------------------
def test_compact_leaves_a_running_job_alone(config, store):
    other, said = held_by_another(store), []
    assert compact_in(context(config, store), CompactOptions(act=Act.EXECUTE), out=said.append) == EXIT_OK
    assert "Nothing was compacted" in said[0] and store.session.lock_holder() == other.session.me


def test_compact_refuses_while_a_batch_is_open_and_releases_the_lock(config, store):
    with_open_batch(store)
    with pytest.raises(StateConflict, match="batch 1 is open in state PLANNED"):
        compact_in(context(config, store), CompactOptions())
    assert store.session.lock_holder() is None


# -- etl compact, routed ----------------------------------------------------------------------
ROUTES = f"""[route orders]
topics = orders, refunds
table = orders
schema = {EVENTS_SCHEMA}
[route own]
topics_regex = app[.].*
table = {{topic}}
schema = {EVENTS_SCHEMA}
"""


@pytest.fixture
def routed(tmp_path):
    ini = routed_ini(ROUTES, hive="rejected_table = Rejects").replace("hosts = 127.0.0.1:2181",
                                                                      f"hosts = 127.0.0.1:{free_port()}")
    (tmp_path / "routed.ini").write_text(ini.replace("url = file:///tmp/w", f"url = file://{tmp_path}/w"))
    return load_config(tmp_path / "routed.ini")


def _loaded(store: MemoryStore, *topics: str) -> None:
    store.session.acquire_lock()
    committed(store, batch(ranges=tuple(OffsetRange(t, 0, 0, 5, None) for t in topics)))
    store.session.release_lock()


def test_routed_compact_leaves_a_running_job_alone_and_refuses_an_open_batch(routed, store):
    other, said = held_by_another(store), []
    assert compact_in(context(routed, store), CompactOptions(act=Act.EXECUTE), out=said.append) == EXIT_OK
    assert "Nothing was compacted" in said[0] and store.session.lock_holder() == other.session.me
    other.session.release_lock()
    with_open_batch(store)
    with pytest.raises(StateConflict, match="batch 1 is open in state PLANNED"):
        compact_in(context(routed, store), CompactOptions(tables=("rejects",), act=Act.EXECUTE))
    assert store.session.lock_holder() is None


def test_an_unknown_table_is_refused_naming_the_jobs_tables_and_nothing_is_touched(routed, store):
    _loaded(store, "orders", "app.x")
    with pytest.raises(ConfigError, match=r"--table nope: not a table of job j1, whose tables are app_x, orders, "
                                          r"rejects; nothing was touched"):
        compact_in(context(routed, store), CompactOptions(tables=("orders", "nope"), act=Act.EXECUTE))
    assert store.session.lock_holder() is None and store.compactions.open_compactions() == []


def test_the_tables_compacted_are_those_loaded_into_a_retired_routes_and_the_rejected_one_once(routed, store, tmp_path):
    _loaded(store, "orders", "refunds", "app.x")
    ctx = context(routed, store)
    main = TableKind.MAIN
    assert compaction_tables(routed, store, ctx.warehouse, None) == (
        CompactedTable(main, "app_x"), CompactedTable(main, "orders"), CompactedTable(TableKind.REJECTED))
    assert compaction_tables(routed, store, ctx.warehouse, ["REJECTS", "Orders", "orders"]) == (
        CompactedTable(main, "orders"), CompactedTable(TableKind.REJECTED))
    fewer = routed_ini(ROUTES.split("[route own]")[0], hive="rejected_table = rejects")
    (tmp_path / "fewer.ini").write_text(fewer)
    retired = replace(RouteBinding.of(load_config(tmp_path / "fewer.ini"), ctx.warehouse),
                      retired=RouteBinding.of(routed, ctx.warehouse).routes[1:])
    store.session.acquire_lock()
    store.operator.bind_first(retired)
    store.session.release_lock()
    assert [t.name for t in compaction_tables(load_config(tmp_path / "fewer.ini"), store, ctx.warehouse, None)] == \
        ["app_x", "orders", None]


def test_table_names_a_one_table_jobs_table_or_its_rejected_one(config, store):
    ctx = context(config, store)
    assert compaction_tables(config, store, ctx.warehouse, None) == ONE_TABLE
    assert compaction_tables(config, store, ctx.warehouse, ["t_rejected"]) == (CompactedTable(TableKind.REJECTED),)
    assert compaction_tables(config, store, ctx.warehouse, ["T"]) == (CompactedTable(TableKind.MAIN),)


# -- etl bind -------------------------------------------------------------------------------
def test_bind_is_refused_while_a_run_holds_the_lock(config, store):
    held_by_another(store)
    with pytest.raises(RefusedUntilDone,
                       match="^a run holds the job lock; try again when it has finished; nothing changed$") as refused:
        bind_in(context(config, store), EXECUTE_BIND)
    assert refused.value.exit_code == EXIT_BATCH_FAILED


def test_bind_is_refused_while_a_batch_is_open(config, store):
    with_open_batch(store)
    with pytest.raises(RefusedUntilDone, match="batch 1 is open; finish it with the old config"):
        bind_in(context(config, store), EXECUTE_BIND)
    assert store.session.lock_holder() is None and store.operator.binding() is None


def test_bind_to_the_table_the_job_is_bound_to_does_nothing(config, store):
    ctx = context(config, store)
    store.session.acquire_lock()
    store.operator.bind_first(Target.of(config, ctx.warehouse))
    store.session.release_lock()
    said = []
    assert bind_in(ctx, EXECUTE_BIND, out=said.append) == EXIT_OK
    assert "already bound" in said[0]


def test_bind_without_execute_only_shows_the_change_and_exits_0(config, store):
    store.session.acquire_lock()
    store.operator.bind_first(OTHER)
    committed(store, batch())
    store.session.release_lock()
    said = []
    assert bind_in(context(config, store), BindOptions(), out=said.append) == EXIT_OK
    assert said[-1] == "preview: nothing changed; pass --execute to apply"
    assert store.operator.binding() == OTHER and store.session.lock_holder() is None


# -- etl recover ----------------------------------------------------------------------------
def test_recover_changes_nothing_while_a_run_holds_the_lock(config, store):
    other, said, report = held_by_another(store), [], {}
    code = recover_in(context(config, store, JobContext), EXECUTE_RECOVER, out=said.append, report=report)
    assert code == EXIT_OK and report["lock"] == other.session.me.describe() and "changes nothing" in said[0]


def test_recover_of_a_job_that_never_ran_has_nothing_to_repair(config, store):
    said, report = [], {}
    with context(config, store, JobContext) as ctx:
        assert recover_in(ctx, RecoverOptions(), out=said.append, report=report) == EXIT_OK
    assert said == ["no open batch: the job has not run a batch yet", "nothing to repair"]
    assert report["open_batch"] is None and report["actions"] == []


def test_recover_deletes_the_temp_files_of_dead_attempts_and_nothing_else(config, store):
    ctx = context(config, store, JobContext)
    folder = Path(ctx.warehouse.main_dir({"dt": "2026-01-01", "hour": "00"}).removeprefix("file://"))
    folder.mkdir(parents=True)
    (folder / "_tmp.attempt-1").write_bytes(b"half")
    (folder / "notes.txt").write_bytes(b"not the job's")
    said = []
    with ctx:
        assert recover_in(ctx, RecoverOptions(), out=said.append) == EXIT_OK
        assert said[-2:] == ["  - delete 1 temp files left by dead attempts",
                             "preview: nothing changed; pass --execute to apply"] \
            and (folder / "_tmp.attempt-1").exists()
        assert recover_in(ctx, EXECUTE_RECOVER, out=said.append) == EXIT_OK
    assert said[-1] == "done: deleted 1 temp files" and sorted(p.name for p in folder.iterdir()) == ["notes.txt"]
    assert store.session.lock_holder() is None and store.batches.batch_ids() == []


# -- etl reset-offsets ----------------------------------------------------------------------
def test_reset_is_refused_while_a_run_holds_the_lock(config, store):
    other, said, report = held_by_another(store), [], {}
    with pytest.raises(RefusedUntilDone, match="^a run holds the job lock") as refused:
        reset_in(context(config, store, JobContext), EXECUTE_RESET, out=said.append, report=report)
    assert refused.value.exit_code == EXIT_BATCH_FAILED and report == {"lock": other.session.me.describe()}


def test_reset_is_refused_while_a_batch_is_open_and_moves_nothing(config, store):
    store.session.acquire_lock()
    committed(store, batch())
    store.batches.write_plan(batch(2, ranges=(OffsetRange("t", 0, 10, 20, 10),)))
    store.session.release_lock()
    said, report = [], {}
    with pytest.raises(RefusedUntilDone, match=r"run `etl recover --execute` first") as refused:
        reset_in(context(config, store, JobContext), EXECUTE_RESET, out=said.append, report=report)
    assert refused.value.exit_code == EXIT_BATCH_FAILED and report == {"open_batch": 2}
    assert values(store) == {("t", 0): 10, ("t", 1): 5} and store.session.lock_holder() is None


# -- etl run --dry-run ----------------------------------------------------------------------
def test_a_dry_run_shows_the_open_batch_a_run_would_complete(config, store):
    with_open_batch(store)
    shown = preview(context(config, store, JobContext))
    assert shown["action"] == "complete_open_batch" and shown["batch_id"] == 1 and shown["state"] == "PLANNED"
    assert [(r["topic"], r["partition"], r["from"], r["until"]) for r in shown["ranges"]] == [("t", 0, 0, 10),
                                                                                               ("t", 1, 0, 5)]
    assert shown["target"]["partitions"][0]["partition"] == "dt=2026-01-01/hour=00"


def test_a_dry_run_of_a_job_bound_to_another_table_is_refused_as_the_run_is(config, store):
    from etl.model.binding import BindingMismatch, check_bound
    ctx = context(config, store, JobContext)
    elsewhere = replace(Target.of(config, ctx.warehouse), table="other")
    store.session.acquire_lock()
    store.operator.bind_first(elsewhere)
    store.session.release_lock()
    with pytest.raises(BindingMismatch) as run_refused:
        check_bound(elsewhere, Target.of(config, ctx.warehouse), config)
    with pytest.raises(BindingMismatch) as dry_refused:
        preview(ctx)
    assert str(dry_refused.value) == str(run_refused.value) and store.operator.binding() == elsewhere


# -- etl run --------------------------------------------------------------------------------
class _Seen(JobObserver):
    def __init__(self):
        self.lock_was_held = False

    def lock_held(self) -> None:
        self.lock_was_held = True


def test_a_run_that_finds_the_lock_held_raises_having_done_nothing(config, store):
    held_by_another(store)
    seen = _Seen()
    # a driver JVM launched as `etl run` launches it, before it imports and plans (launch_early,
    # which launches nothing in a process that already runs a gateway, as other tests' may)
    with open(os.devnull, "wb") as nowhere:
        early = EarlyLaunch(EarlyJvm(context_settings(config, {}, None), nowhere.fileno()), None)
    with JobContext(config, store=store, fs=LocalFileSystem(), observer=seen, early=early) as context:
        with pytest.raises(LockHeld, match="is already running"):
            run_in(context)
        launched = psutil.Process().children()
    assert seen.lock_was_held and store.batches.batch_ids() == []
    assert early.jvm.process.pid in [p.pid for p in launched]
    assert early.jvm.process.poll() is not None  # killed unused when the context closed


# -- etl history ----------------------------------------------------------------------------
def test_history_lists_the_newest_batches_first(store):
    store.session.acquire_lock()
    for batch_id, start in ((1, 0), (2, 10), (3, 20)):
        committed(store, batch(batch_id, ranges=(OffsetRange("t", 0, start, start + 10, start or None),)))
    assert [b["batch_id"] for b in collect_history(store, 2)] == [3, 2]


def test_a_one_table_job_with_partitions_awaiting_their_marker_is_not_bound_to_routes(config, store, tmp_path):
    """A one-table job's ledger names no table (etl.sink.marker_ledger): bound to routes, its
    waiting partitions would be marked in no table's folder. So bind waits until they are marked."""
    ctx = context(config, store)
    store.session.acquire_lock()
    store.operator.bind_first(Target.of(config, ctx.warehouse))
    committed(store, batch(ranges=(OffsetRange("a", 0, 0, 10, None),),
                           extra={"markers": {"unmarked": [{"dt": "2026-01-01", "hour": "00"}]}}))
    store.session.release_lock()
    ini = routed_ini(f"[route all]\ntopics = a\ntable = t\nschema = {EVENTS_SCHEMA}\n",
                     hive="rejected_table = t_rejected")
    (tmp_path / "routed.ini").write_text(ini.replace("hosts = 127.0.0.1:2181", "hosts = 127.0.0.1:1")
                                         .replace("url = file:///tmp/w", f"url = file://{tmp_path}/w"))
    said: list[str] = []
    routed = load_config(tmp_path / "routed.ini")
    with pytest.raises(Refused, match=r"1 partition awaits its _SUCCESS marker \(dt=2026-01-01/hour=00\).*; nothing "
                                      r"changed$") as refused:
        bind_in(context(routed, store), EXECUTE_BIND, out=said.append)
    assert refused.value.exit_code == EXIT_USAGE and store.operator.binding() == Target.of(config, ctx.warehouse)
