"""A routed job's batches (issue 30, topic routes): each range's table as the plan recorded it
(etl.job.batch_tables), the tables a command inspects (etl.ops.job_tables), the topics no table
can take (etl.source.topics), and the binding of a job to its routes (etl.model.route_binding).
No service: the configs name closed ports, and the writer specs are built from the DDL alone."""
from __future__ import annotations

from dataclasses import replace

import pytest

from etl.config import load_config
from etl.context.command import CommandContext
from etl.cli import main
from etl.errors import EXIT_OK, EXIT_USAGE, Refused, StateConflict
from etl.job.assemble import route_specs
from etl.job.batch_tables import BatchTables, refuse_lost_topics
from etl.model.shape import planned_tables, shape_of
from etl.model.batch import Batch, BatchState, OffsetRange
from etl.model.binding import BindingMismatch, Target
from etl.model.compaction import Relocations, TableKind
from etl.model.route_binding import RouteBinding, binding_from_json, check_job_binding, check_planned
from etl.ops.job_tables import job_tables
from etl.ops.acting import Act
from etl.ops.rebind import BindOptions, bind_in
from etl.sink.fs import LocalFileSystem
from etl.sink.warehouse import Warehouse
from etl.source.topics import JobTopics, NotLoadedReason, TopicRouting, not_loaded_topics
from tests.harness.config_file import TWO_ROUTES as ROUTES, minimal_ini, routed_ini
from tests.harness.memory_store import MemoryStore
from tests.harness.paths import EVENTS_SCHEMA
from tests.harness.ports import free_port
from tests.harness.store_contract import batch, committed, compaction, switched


def _nowhere(ini: str) -> str:
    """The INI with ZooKeeper, Kafka and the metastore at ports nothing listens on: a command run
    here by mistake fails to connect, rather than write into the local stack's services."""
    return (ini.replace("hosts = 127.0.0.1:2181", f"hosts = 127.0.0.1:{free_port()}")
            .replace("bootstrap.servers = 127.0.0.1:9092", f"bootstrap.servers = 127.0.0.1:{free_port()}")
            .replace("[hive]\n", f"[hive]\nmetastore = thrift://127.0.0.1:{free_port()}\n", 1))


@pytest.fixture
def routed(tmp_path):
    (tmp_path / "etl.ini").write_text(_nowhere(routed_ini(ROUTES)))
    return load_config(tmp_path / "etl.ini")


@pytest.fixture
def one_table(tmp_path):
    (tmp_path / "one.ini").write_text(_nowhere(minimal_ini(EVENTS_SCHEMA, kafka="topics = a, b")))
    return load_config(tmp_path / "one.ini")


def _batch(*topics: str, tables: dict | None = None) -> Batch:
    ranges = tuple(OffsetRange(topic, 0, 0, 5, 0) for topic in topics)
    return Batch(1, BatchState.PLANNED, "2026-11-26T10:00:00+00:00", {"dt": "2026-11-26", "hour": "10"}, ranges,
                 tables=tables or {})


def _tables(config, batch: Batch) -> BatchTables:
    specs = route_specs(config)
    return BatchTables(batch, Warehouse.of(config), shape_of(config), lambda route, topic: specs[route.name])


def _routing(config, committed=()) -> TopicRouting:
    return TopicRouting(config.routes, config.hive.rejected_table, lambda: set(committed))


def test_a_routed_batch_writes_each_range_into_the_table_its_plan_recorded(routed):
    chosen = _routing(routed).apply(JobTopics(("app.clicks", "orders", "refunds")))
    batch = planned_tables(_batch("app.clicks", "orders", "refunds"), chosen.tables)
    assert batch.tables == {"app.clicks": ["raw_app_clicks"], "orders": ["orders"], "refunds": ["orders"]}
    tables = _tables(routed, batch)
    assert [t.name for t in tables.all()] == ["raw_app_clicks", "orders"]
    clicks, orders = tables.all()
    assert clicks.warehouse.main_dir({"dt": "d"}) == "/tmp/w/db.db/raw_app_clicks/dt=d"
    assert orders.warehouse.main_dir({"dt": "d"}) == "/tmp/w/db.db/orders/dt=d"
    assert clicks.warehouse.rejected_dir({"dt": "d"}) == orders.warehouse.rejected_dir({"dt": "d"}) \
        == "/tmp/w/db.db/rejects/dt=d"
    assert (clicks.config.hive.the_table, orders.config.hive.the_table) == ("raw_app_clicks", "orders")


def test_the_plan_keeps_its_tables_through_its_json(routed):
    batch = planned_tables(_batch("orders"), _routing(routed).apply(JobTopics(("orders",))).tables)
    again = Batch.from_json(batch.header_json(), [r.to_json() for r in batch.ranges])
    assert again.tables == {"orders": ["orders"]}
    with pytest.raises(StateConflict):
        batch.amended(tables={"orders": ["elsewhere"]})


def test_a_one_table_batch_is_written_to_its_table_and_stores_no_tables(one_table):
    routing = _routing(one_table).apply(JobTopics(("a", "b"))).tables
    batch = shape_of(one_table).planned(_batch("a", "b"), lambda: routing)
    assert "tables" not in batch.header_json()
    [table] = _tables(one_table, batch).all()
    assert table.name == "t" and table.config == one_table and table.warehouse == Warehouse.of(one_table)


def test_each_routed_table_is_seen_where_its_own_compactions_moved_it(routed):
    p, moved = "dt=d/hour=01", "_compacted/dt=d/hour=01/c0000000003"
    relocations = Relocations(rejected={p: "_compacted/dt=d/hour=01/c0000000001"}).moved(TableKind.MAIN, p, moved,
                                                                                          name="orders")
    warehouse = Warehouse.of(routed).with_relocations(relocations)
    assert warehouse.for_table("orders").main_dir(p) == f"/tmp/w/db.db/orders/{moved}"
    assert warehouse.for_table("raw_app_clicks").main_dir(p) == f"/tmp/w/db.db/raw_app_clicks/{p}"
    assert warehouse.for_table("raw_app_clicks").rejected_dir(p) == warehouse.rejected_dir(p) \
        == "/tmp/w/db.db/rejects/_compacted/dt=d/hour=01/c0000000001"
    assert warehouse.view(None) is warehouse and warehouse.view("orders") == warehouse.for_table("orders")
    batch = planned_tables(_batch("orders"), _routing(routed).apply(JobTopics(("orders",))).tables)
    specs = route_specs(routed)
    tables = BatchTables(batch, warehouse, shape_of(routed), lambda route, topic: specs[route.name])
    assert tables.of(batch.ranges[0]).warehouse.main_dir(p) == f"/tmp/w/db.db/orders/{moved}"


def test_a_routed_warehouse_has_no_one_table_to_write_to(routed):
    with pytest.raises(Exception, match="was handed the job's warehouse instead of one table's view"):
        Warehouse.of(routed).main_dir({"dt": "d"})


def test_a_batch_whose_topic_no_route_writes_to_its_table_any_more_is_refused(routed):
    batch = _batch("orders", tables={"orders": ["raw_orders"]})  # planned before the routes changed
    with pytest.raises(StateConflict, match="the config changed under an open batch"):
        _tables(routed, batch).all()
    with pytest.raises(StateConflict, match="records no table for topic orders"):
        _tables(routed, _batch("orders", tables={"refunds": ["orders"]})).all()


def test_a_topic_no_table_can_take_is_not_loaded_and_is_reported_with_why(routed):
    chosen = _routing(routed, committed={"app.a-b"}).apply(JobTopics(("app.a-b", "app.a.b", "app.x")))
    assert chosen.loaded == ("app.a-b", "app.x")
    [lost] = chosen.unroutable
    assert lost.topic == "app.a.b" and "app.a-b has loaded it and keeps it" in lost.why
    [reported] = not_loaded_topics(chosen, {}, on_broker=["app.a-b", "app.a.b", "app.x"])
    assert reported.reason is NotLoadedReason.UNROUTABLE
    assert reported.describe(routed.kafka).startswith("app.a.b: its table 'raw_app_a_b' is also the table of topic")


def test_a_committed_topic_that_no_table_can_take_any_more_stops_the_plan(routed):
    chosen = _routing(routed).apply(JobTopics(("app.a-b", "app.a.b")))  # neither committed: neither loaded
    assert chosen.loaded == ()
    refuse_lost_topics(chosen, lambda: set(), routed)
    with pytest.raises(BindingMismatch, match="app.a.b: .* it has committed offsets: its records would stop"):
        refuse_lost_topics(chosen, lambda: {"app.a.b"}, routed)


def test_a_job_is_held_to_its_routes_and_to_being_routed_or_not(routed, one_table):
    bound = RouteBinding.of(routed, Warehouse.of(routed))
    assert binding_from_json(bound.to_json()) == bound
    assert bound.root == "file:///tmp/w/db.db" and bound.location("orders") == "file:///tmp/w/db.db/orders"
    check_job_binding(bound, bound, routed, committed=lambda: ["orders"])
    fewer = replace(bound, routes=bound.routes[:1])
    with pytest.raises(BindingMismatch, match=r"removed: \[route orders\] -> orders"):
        check_job_binding(bound, fewer, routed, committed=lambda: ["orders"])
    target = Target.of(one_table, Warehouse.of(one_table))
    with pytest.raises(BindingMismatch, match="is bound to db.t at .* but the config names 2 routes"):
        check_job_binding(target, bound, routed, committed=lambda: ())


def test_an_open_batch_is_finished_under_the_binding_it_was_planned_with(routed, one_table):
    bound = RouteBinding.of(routed, Warehouse.of(routed))
    batch = replace(_batch("orders"), target=bound.to_json())
    check_planned(batch, bound, routed)
    with pytest.raises(BindingMismatch, match="batch 1 was planned to write to 2 routes"):
        check_planned(batch, Target.of(one_table, Warehouse.of(one_table)), one_table)


def test_a_command_inspects_every_table_loaded_into_and_every_table_the_open_batch_writes(routed, one_table):
    warehouse = Warehouse.of(routed)
    opened = _batch("app.new", tables={"app.new": ["raw_app_new"]})
    found = job_tables(routed, warehouse, ["orders", "app.x", "refunds"], opened)
    assert [name for name, _ in found] == ["orders", "raw_app_new", "raw_app_x"]
    assert found[2][1].table_root == "/tmp/w/db.db/raw_app_x"
    assert job_tables(one_table, Warehouse.of(one_table), ["a"], None) == [("t", Warehouse.of(one_table))]


def test_a_command_that_does_not_take_routes_yet_refuses_them_and_touches_nothing(routed, capsys):
    # `compact` takes them now: it is not run here, it would connect (tests/unit/test_commands_in_memory.py)
    assert main(["schema", "suggest", "--config", str(routed.path)]) == EXIT_USAGE
    assert "does not take [route] sections yet; nothing was touched" in capsys.readouterr().err


# -- etl bind with routes, in memory (tests.harness.memory_store): the decisions before Spark ----
TEMPLATED = f"""
[route raw]
topics_regex = app[.].*
table = raw_{{topic}}
schema = {EVENTS_SCHEMA}
"""


def _routed_config(tmp_path, routes: str, name: str = "r.ini"):
    ini = routed_ini(routes)
    (tmp_path / name).write_text(ini)
    return load_config(tmp_path / name)


def _bound(config, store, *loaded: str) -> None:
    """The job bound to `config`'s routes, with `loaded` topics committed."""
    store.session.acquire_lock()
    store.operator.bind_first(RouteBinding.of(config, Warehouse.of(config)))
    if loaded:
        committed(store, batch(ranges=tuple(OffsetRange(topic, 0, 0, 5, None) for topic in loaded)))
    store.session.release_lock()


def _bind(config, store, act=Act.PREVIEW, stop_loading=False) -> tuple[int, list[str]]:
    """The exit code and the lines said; a refusal (raised) ends them, a line per reason."""
    said: list[str] = []
    with CommandContext(config, store=store, fs=LocalFileSystem()) as context:
        try:
            return bind_in(context, BindOptions(act, stop_loading=stop_loading), out=said.append), said
        except Refused as refused:
            return refused.exit_code, [*said, *(f"refused: {reason}" for reason in refused.reasons)]


def test_a_route_added_is_refused_by_the_run_until_bound(tmp_path):
    before, after = _routed_config(tmp_path, TEMPLATED), _routed_config(tmp_path, TEMPLATED + ROUTES.split(
        "[route orders]")[0].replace("[route raw]", "[route more]").replace("app[.]", "more[.]"), "after.ini")
    bound = RouteBinding.of(before, Warehouse.of(before))
    with pytest.raises(BindingMismatch, match=r"added: \[route more\] -> raw_\{topic\}.*run `etl bind --config"):
        check_job_binding(bound, RouteBinding.of(after, Warehouse.of(after)), after, committed=lambda: ["app.x"])
    store = MemoryStore()
    _bound(before, store, "app.x")
    code, said = _bind(after, store)
    assert code == EXIT_OK and said == ["job j1: added: [route more] -> raw_{topic}",
                                        "preview: nothing changed; pass --execute to apply"]
    assert store.operator.binding() == bound and store.session.lock_holder() is None


def test_a_route_removed_whose_topics_have_loaded_records_needs_stop_loading(tmp_path):
    both = _routed_config(tmp_path, ROUTES)
    fewer = _routed_config(tmp_path, ROUTES.split("[route orders]")[0], "fewer.ini")
    store = MemoryStore()
    _bound(both, store, "orders", "app.x")
    code, said = _bind(fewer, store, act=Act.EXECUTE)
    assert code == EXIT_USAGE and said[-1].startswith("refused: orders have loaded records and no route of the "
                                                      "config would load them any more; pass --stop-loading")
    code, said = _bind(fewer, store, stop_loading=True)
    assert code == EXIT_OK and said[-1] == "preview: nothing changed; pass --execute to apply"
    assert store.operator.binding() == RouteBinding.of(both, Warehouse.of(both))


def test_a_loaded_topic_moved_to_another_table_is_refused_without_move_loaded(tmp_path):
    # Moving it with --move-loaded: tests/unit/test_routes_move.py
    renamed = _routed_config(tmp_path, ROUTES.replace("table = orders", "table = sales"), "renamed.ini")
    store = MemoryStore()
    _bound(_routed_config(tmp_path, ROUTES), store, "orders")
    code, said = _bind(renamed, store, act=Act.EXECUTE)
    assert code == EXIT_USAGE and "topic orders's records would go to other tables" in said[0]
    assert said[-1].startswith("refused: orders (orders -> sales) have loaded records that would go to other tables; "
                               "pass --move-loaded")


def _one_table_job(tmp_path, table: str = "table = orders"):
    """A one-table job (table orders) that loaded topic orders, its lock held; and a routed config
    that keeps its tables."""
    (tmp_path / "one.ini").write_text(minimal_ini(EVENTS_SCHEMA, kafka="topics = orders").replace("table = t", table))
    one = load_config(tmp_path / "one.ini")
    keeps = load_config(_write(tmp_path / "keeps.ini", routed_ini(ROUTES, hive="rejected_table = orders_rejected")))
    store = MemoryStore()
    store.session.acquire_lock()
    store.operator.bind_first(Target.of(one, Warehouse.of(one)))
    committed(store, batch(ranges=(OffsetRange("orders", 0, 0, 5, None),)))
    return keeps, store


def test_a_one_table_job_takes_routes_only_where_its_loaded_topics_stay_in_its_table(tmp_path):
    keeps, store = _one_table_job(tmp_path)
    store.session.release_lock()
    with pytest.raises(BindingMismatch, match=r"or turn it into a job with routes on purpose with `etl bind --config"):
        check_job_binding(store.operator.binding(), RouteBinding.of(keeps, Warehouse.of(keeps)), keeps,
                          committed=lambda: ["orders"])
    code, said = _bind(keeps, store)
    assert code == EXIT_OK and said[1:] == ["the records of orders stay in orders, and go on going there",
                                            "preview: nothing changed; pass --execute to apply"], said
    renamed = load_config(_write(tmp_path / "renamed.ini", routed_ini(
        ROUTES.replace("table = orders", "table = sales"), hive="rejected_table = rejects")))
    code, said = _bind(renamed, store, act=Act.EXECUTE)
    assert code == EXIT_USAGE and [line.split(" at ")[0].split(",")[0] for line in said[1:]] == [
        "refused: the rejected table rejects is", "refused: topic orders's records were loaded into orders"], said
    assert isinstance(store.operator.binding(), Target)


class _NoHive(CommandContext):
    """bind's tables are ensured in Hive: nothing to ensure here (no Spark in unit tests)."""

    def registrar(self):
        return None

    def table_registrar(self, view, warehouse, ddl=None):
        return None


def _one_table_compacted(tmp_path, under_way: bool):
    """_one_table_job with a compacted partition in its table and its rejected one, and maybe a
    compaction under way."""
    keeps, store = _one_table_job(tmp_path, "table = orders\nrejected_table = orders_rejected")
    main, rejected = switched(store, compaction(1)), switched(store, compaction(2, table=TableKind.REJECTED))
    for plan, version in store.compactions.open_compactions():  # their replaced files deleted: finished
        store.compactions.drop_compaction(plan, version)
    if under_way:
        store.compactions.write_compaction(compaction(3, "dt=2026-01-01/hour=01"))
    store.session.release_lock()
    return keeps, store, main, rejected


def test_a_one_table_job_bound_to_routes_keeps_its_compacted_partitions_as_its_tables(tmp_path):
    keeps, store, main, rejected = _one_table_compacted(tmp_path, under_way=False)
    said: list[str] = []
    with _NoHive(keeps, store=store, fs=LocalFileSystem()) as context:
        assert bind_in(context, BindOptions(Act.EXECUTE), out=said.append) == EXIT_OK, said
    assert "its 1 compacted partitions stay where they are, as table orders's" in said
    assert isinstance(store.operator.binding(), RouteBinding)
    assert store.compactions.relocations() == Relocations(rejected={rejected.partition: rejected.target},
                                              tables={"orders": {main.partition: main.target}})
    view = Warehouse.of(keeps).with_relocations(store.compactions.relocations()).for_table("orders")
    assert view.main_dir(main.partition) == f"/tmp/w/db.db/orders/{main.target}"


def test_a_one_table_job_with_a_compaction_under_way_is_not_bound_to_routes(tmp_path):
    keeps, store, main, _ = _one_table_compacted(tmp_path, under_way=True)
    before = store.compactions.relocations()
    code, said = _bind(keeps, store, act=Act.EXECUTE)
    assert code == EXIT_USAGE \
        and said[-1].startswith("refused: a compaction is under way: `etl compact` finishes it"), said
    assert isinstance(store.operator.binding(), Target) and store.compactions.relocations() == before
    assert store.session.lock_holder() is None


def _write(path, text: str):
    path.write_text(text)
    return path


def test_a_retired_route_keeps_its_tables_in_what_verify_inspects(tmp_path):
    both = _routed_config(tmp_path, ROUTES)
    fewer = _routed_config(tmp_path, ROUTES.split("[route orders]")[0], "fewer.ini")
    bound = replace(RouteBinding.of(fewer, Warehouse.of(fewer)),
                    retired=RouteBinding.of(both, Warehouse.of(both)).routes[1:])
    assert binding_from_json(bound.to_json()) == bound and "retired" in bound.to_json()
    found = job_tables(fewer, Warehouse.of(fewer), ["orders", "app.x"], None, bound)
    assert [name for name, _ in found] == ["orders", "raw_app_x"]
    assert [name for name, _ in job_tables(fewer, Warehouse.of(fewer), ["orders", "app.x"], None)] == ["raw_app_x"]


def test_a_routed_batch_records_each_tables_rows_and_history_shows_them(routed):
    from etl.job.batch_tables import routed_written
    from etl.job.range_task import RangeResult
    from etl.ops.history import batch_json, render_history
    batch = _batch("app.clicks", "orders", "refunds", tables={"app.clicks": ["raw_app_clicks"], "orders": ["orders"],
                                                              "refunds": ["orders"]})
    results = [RangeResult(r, True, rows, 0) for r, rows in zip(batch.ranges, (3, 4, 5))]
    written = replace(batch, **routed_written(batch, results))
    assert written.extra == {"table_rows": {"orders": 9, "raw_app_clicks": 3}}
    assert routed_written(_batch("a"), results[:1]) == {}
    assert "rows by table: orders 9, raw_app_clicks 3" in render_history("j1", [batch_json(written)])


# -- etl recover: a range is rewritten into its topic's tables as routed now ---------------------
def test_recover_refuses_to_rewrite_a_range_of_a_topic_no_route_takes_any_more(routed, one_table):
    from etl.ops.coverage import Span
    from etl.ops.recovery import _without_table

    class Kafka:  # what recover asks of Kafka here: the topics chosen now, routed
        def job_topics(self) -> JobTopics:
            return _routing(routed).apply(JobTopics(("orders",)))
    gaps = [Span("orders", 0, 0, 5, None), Span("retired", 1, 0, 5, None), Span("retired", 0, 5, 9, None)]
    [problem] = _without_table(routed, Kafka(), gaps)
    assert (problem.kind, problem.where) == ("no_table", "retired") and "etl bind" in problem.action
    assert _without_table(routed, Kafka(), gaps[:1]) == []
    assert _without_table(one_table, Kafka(), gaps) == []  # a one-table job's ranges have its table
