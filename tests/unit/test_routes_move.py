"""`etl bind --move-loaded`: a loaded topic moved to other tables on purpose (etl.ops.rebind). Its
old routes, restricted to it, stay bound as retired (etl.model.route_binding), so that the
commands that inspect the job's tables (etl.ops.job_tables) go on finding its old files, while
its new records go to its new tables. In memory (tests.harness.memory_store): the configs name
closed ports, and bind's Hive work is left out (no Spark)."""
from __future__ import annotations

from collections import Counter

import pytest

from etl.cli import main
from etl.config import load_config
from etl.context.command import CommandContext
from etl.errors import EXIT_OK, EXIT_USAGE, Refused
from etl.model.batch import OffsetRange
from etl.model.binding import BindingMismatch
from etl.model.route_binding import BoundRoute, RouteBinding, check_job_binding
from etl.ops.job_tables import held_by_job, job_tables
from etl.ops.acting import Act
from etl.ops.rebind import BindOptions, bind_in
from etl.sink.fs import LocalFileSystem
from etl.sink.warehouse import Warehouse
from tests.harness.config_file import routed_ini
from tests.harness.memory_store import MemoryStore
from tests.harness.paths import EVENTS_SCHEMA
from tests.harness.ports import free_port
from tests.harness.store_contract import batch, committed


def _route(name: str, table: str, topics: str = "", regex: str = "", split: str = "") -> str:
    chooses = f"topics_regex = {regex}" if regex else f"topics = {topics}"
    return f"[route {name}]\n{chooses}\ntable = {table}\nschema = {EVENTS_SCHEMA}\n{split}"


RAW = _route("raw", "raw_{topic}", regex="app[.].*")
ORDERS = _route("orders", "orders", "orders, refunds")


def _config(tmp_path, name: str, routes: str, rejected: str = "rejects"):
    """A routed job's config whose services are at closed ports, its warehouse in tmp_path (one
    for every config of a test: the same folders)."""
    ini = (routed_ini(routes, hive=f"rejected_table = {rejected}")
           .replace("url = file:///tmp/w", f"url = file://{tmp_path}/w")
           .replace("hosts = 127.0.0.1:2181", f"hosts = 127.0.0.1:{free_port()}")
           .replace("bootstrap.servers = 127.0.0.1:9092", f"bootstrap.servers = 127.0.0.1:{free_port()}")
           .replace("[hive]\n", f"[hive]\nmetastore = thrift://127.0.0.1:{free_port()}\n", 1))
    (tmp_path / f"{name}.ini").write_text(ini)
    return load_config(tmp_path / f"{name}.ini")


class _NoHive(CommandContext):
    """bind's tables are ensured in Hive: nothing to ensure here (no Spark in unit tests)."""

    def registrar(self):
        return None

    def table_registrar(self, view, warehouse, ddl=None):
        return None


def _loaded(config, *topics: str) -> MemoryStore:
    """A job bound to `config`'s routes, whose `topics` have committed offsets."""
    store = MemoryStore()
    store.session.acquire_lock()
    store.operator.bind_first(RouteBinding.of(config, Warehouse.of(config)))
    committed(store, batch(ranges=tuple(OffsetRange(topic, 0, 0, 5, None) for topic in topics)))
    store.session.release_lock()
    return store


def _bind(config, store, act=Act.EXECUTE, move_loaded=False, stop_loading=False) -> tuple[int, list[str]]:
    """The exit code and the lines said; a refusal (raised) ends them, a line per reason."""
    said: list[str] = []
    options = BindOptions(act, stop_loading=stop_loading, move_loaded=move_loaded)
    with _NoHive(config, store=store, fs=LocalFileSystem()) as context:
        try:
            return bind_in(context, options, out=said.append), said
        except Refused as refused:
            return refused.exit_code, [*said, *(f"refused: {reason}" for reason in refused.reasons)]


def _tables(config, store, *topics: str) -> list[str]:
    return [name for name, _ in job_tables(config, Warehouse.of(config), topics, None, store.operator.binding())]


def test_a_move_is_refused_without_move_loaded_naming_each_topic_and_its_tables(tmp_path):
    before = _config(tmp_path, "before", RAW + ORDERS)
    store = _loaded(before, "orders", "refunds", "app.x")
    bound, events = store.operator.binding(), store.operator.events()
    moved = _config(tmp_path, "moved", RAW + ORDERS.replace("table = orders", "table = sales"))
    code, said = _bind(moved, store)
    assert code == EXIT_USAGE, said
    assert said[-1] == ("refused: orders (orders -> sales) and refunds (orders -> sales) have loaded records that "
                        "would go to other tables; pass --move-loaded to move them on purpose (their records "
                        "loaded so far stay in the old tables, which `etl verify` goes on checking, and the next "
                        "ones go to the new tables); nothing changed"), said
    assert store.operator.binding() == bound and store.operator.events() == events \
        and store.session.lock_holder() is None


def test_a_move_with_move_loaded_keeps_the_old_routes_of_each_moved_topic_as_retired(tmp_path):
    before = _config(tmp_path, "before", RAW + ORDERS)
    store = _loaded(before, "orders", "refunds", "app.x")
    moved = _config(tmp_path, "moved", RAW + ORDERS.replace("table = orders", "table = sales"))
    code, said = _bind(moved, store, act=Act.PREVIEW, move_loaded=True)
    assert code == EXIT_OK and said[-1] == "preview: nothing changed; pass --execute to apply", said
    assert store.operator.binding().retired == (), said
    code, said = _bind(moved, store, move_loaded=True)
    assert code == EXIT_OK and said[-1] == "bound; recorded in ZooKeeper; moved to other tables: orders, refunds", said
    stored = store.operator.binding()
    assert stored.routes == RouteBinding.of(moved, Warehouse.of(moved)).routes
    assert stored.retired == (BoundRoute("orders/orders", "orders", topics=("orders",)),
                              BoundRoute("orders/refunds", "orders", topics=("refunds",)))
    check_job_binding(stored, RouteBinding.of(moved, Warehouse.of(moved)), moved,
                      lambda: ["orders", "refunds", "app.x"])
    assert _tables(moved, store, "orders", "refunds", "app.x") == ["orders", "raw_app_x", "sales"]
    assert _bind(moved, store, move_loaded=True)[1] == ["job j1 is already bound to its 2 routes; nothing to do"]


def test_a_moved_topics_old_table_is_inspected_and_holds_nothing_once_its_files_are_gone(tmp_path):
    before = _config(tmp_path, "before", RAW + ORDERS)
    store = _loaded(before, "app.x")
    moved = _config(tmp_path, "moved", RAW.replace("app[.].*", "app[.]y.*") + ORDERS + _route("x", "apps", "app.x"))
    assert _bind(moved, store, move_loaded=True)[0] == EXIT_OK
    assert store.operator.binding().retired == (BoundRoute("raw/app.x", "raw_{topic}", topics=("app.x",)),)
    assert _tables(moved, store, "app.x") == ["apps", "raw_app_x"]
    held = held_by_job(LocalFileSystem(), moved, store, Warehouse.of(moved))  # no folder at all: nothing held
    assert sorted(held.by_table) == ["apps", "raw_app_x"] and not held.by_table["raw_app_x"].files


SPLIT = (_route("clicks", "clicks", "events", split="field = kind\nvalues = click\n")
         + _route("rest", "events_other", "events", split="field = kind\nvalues = *\n"))


def test_a_split_topic_moved_to_one_table_keeps_both_of_its_old_tables(tmp_path):
    store = _loaded(_config(tmp_path, "before", SPLIT), "events")
    whole = _config(tmp_path, "whole", _route("events", "events_all", "events"))
    code, said = _bind(whole, store)
    assert code == EXIT_USAGE and "events (clicks, events_other -> events_all)" in said[-1], said
    assert _bind(whole, store, move_loaded=True)[0] == EXIT_OK
    removed = RouteBinding.of(_config(tmp_path, "before", SPLIT), Warehouse.of(whole)).routes  # retired whole, as ever
    assert store.operator.binding().retired == (
        *removed, BoundRoute("clicks/events", "clicks", "kind", ("click",), ("events",)),
        BoundRoute("rest/events", "events_other", "kind", ("*",), ("events",)))
    assert _tables(whole, store, "events") == ["clicks", "events_all", "events_other"]


def test_a_topic_moved_twice_keeps_both_of_its_earlier_tables(tmp_path):
    store = _loaded(_config(tmp_path, "a", _route("t", "a", "t")), "t")
    b, c = _config(tmp_path, "b", _route("t", "b", "t")), _config(tmp_path, "c", _route("t", "c", "t"))
    assert _bind(b, store, move_loaded=True)[0] == EXIT_OK
    assert _bind(c, store, move_loaded=True)[0] == EXIT_OK
    assert [(r.name, r.table) for r in store.operator.binding().retired] == [("t/t", "a"), ("t/t", "b")]
    assert _tables(c, store, "t") == ["a", "b", "c"]
    check_job_binding(store.operator.binding(), RouteBinding.of(c, Warehouse.of(c)), c, lambda: ["t"])


def test_a_move_and_a_stop_are_each_refused_without_their_flag_and_made_together_with_both(tmp_path):
    store = _loaded(_config(tmp_path, "before", RAW + ORDERS), "orders", "app.x")
    after = _config(tmp_path, "after", _route("orders", "sales", "orders"))
    code, said = _bind(after, store, move_loaded=True)
    assert code == EXIT_USAGE and "pass --stop-loading" in said[-1] and store.operator.binding().retired == (), said
    code, said = _bind(after, store, stop_loading=True)
    assert code == EXIT_USAGE and "pass --move-loaded" in said[-1] and store.operator.binding().retired == (), said
    code, said = _bind(after, store, stop_loading=True, move_loaded=True)
    assert code == EXIT_OK and said[-1].endswith("; no longer loaded: app.x; moved to other tables: orders"), said
    assert [(r.name, r.table) for r in store.operator.binding().retired] == [("raw", "raw_{topic}"),
                                                                             ("orders/orders", "orders")]
    assert _tables(after, store, "orders", "app.x") == ["orders", "raw_app_x", "sales"]


def test_another_database_or_folder_stays_refused_with_move_loaded(tmp_path):
    store = _loaded(_config(tmp_path, "before", ORDERS), "orders")
    bound = store.operator.binding()
    other = _config(tmp_path, "other", ORDERS.replace("table = orders", "table = sales"), rejected="elsewhere")
    code, said = _bind(other, store, move_loaded=True)
    assert code == EXIT_USAGE and said[-1] == ("refused: moving the job's tables to another database or folder, or "
                                               "giving it another rejected table, is not built yet; "
                                               "nothing changed"), said
    assert store.operator.binding() == bound


def test_a_retired_pattern_counts_only_for_topics_it_may_have_loaded(tmp_path):
    """A route retired by --stop-loading keeps its pattern: a topic it matches that a route of the
    config takes now (one created after it was retired) was never loaded by it, and its table may
    not exist, which `etl verify --deep` could not read."""
    store = _loaded(_config(tmp_path, "before", RAW + ORDERS), "orders", "app.x")
    fewer = _config(tmp_path, "fewer", ORDERS + _route("late", "late", "app.late"))
    assert _bind(fewer, store, stop_loading=True)[0] == EXIT_OK
    assert _tables(fewer, store, "orders", "app.x", "app.late") == ["late", "orders", "raw_app_x"]


def test_topics_stopped_then_routed_again_to_another_table_are_moved_from_their_retired_one(tmp_path):
    """A stopped topic's records are in its retired route's table: routing it again elsewhere is a
    move, and that route, which names it, keeps the table among the job's."""
    store = _loaded(_config(tmp_path, "before", RAW + ORDERS), "orders", "refunds", "app.x")
    assert _bind(_config(tmp_path, "stopped", RAW), store, stop_loading=True)[0] == EXIT_OK
    again = _config(tmp_path, "again", RAW + _route("again", "sales", "orders, refunds"))
    code, said = _bind(again, store)
    assert code == EXIT_USAGE and said[-1].startswith("refused: orders (orders -> sales) and refunds (orders -> "
                                                      "sales) have loaded records"), said
    assert _bind(again, store, move_loaded=True)[0] == EXIT_OK
    assert [r.name for r in store.operator.binding().retired] == ["orders", "orders/orders", "orders/refunds"]
    assert _tables(again, store, "orders", "refunds", "app.x") == ["orders", "raw_app_x", "sales"]


def test_a_topic_a_retired_pattern_stopped_then_routed_again_keeps_its_retired_table(tmp_path):
    store = _loaded(_config(tmp_path, "before", RAW + ORDERS), "orders", "app.x")
    assert _bind(_config(tmp_path, "stopped", ORDERS), store, stop_loading=True)[0] == EXIT_OK
    again = _config(tmp_path, "again", ORDERS + _route("x", "apps", "app.x"))
    code, said = _bind(again, store)
    assert code == EXIT_USAGE and said[-1].startswith("refused: app.x (raw_app_x -> apps) have loaded records"), said
    assert _bind(again, store, move_loaded=True)[0] == EXIT_OK
    assert store.operator.binding().retired[-1] == BoundRoute("raw/app.x", "raw_{topic}", topics=("app.x",))
    assert _tables(again, store, "orders", "app.x") == ["apps", "orders", "raw_app_x"]


def test_the_oracle_reads_a_moved_topics_old_table_as_one_of_its_own(tmp_path):
    from tests.harness.oracle import job_tables as oracle_tables
    store = _loaded(_config(tmp_path, "before", RAW + ORDERS), "orders", "app.x")
    moved = _config(tmp_path, "moved", RAW + ORDERS.replace("table = orders", "table = sales"))
    assert _bind(moved, store, move_loaded=True)[0] == EXIT_OK
    found = oracle_tables(moved, ["orders", "app.x"], store.operator.binding())
    assert found.tables == ("orders", "raw_app_x", "sales") and found.earlier == {"orders": ("orders",)}
    assert oracle_tables(moved, ["orders", "app.x"]).tables == ("raw_app_x", "sales")
    rows = {"orders": Counter({("orders", 0, 0): 1}), "sales": Counter({("orders", 0, 1): 1}),
            "raw_app_x": Counter({("orders", 0, 2): 1})}
    main_rows, _, strays = found.read(lambda db, table: rows.get(table, Counter()), "db")
    assert sum(main_rows.values()) == 3 and strays == [
        "1 offsets in table raw_app_x, whose topics go to other tables, e.g. [('orders', 0, 2)]"]


def test_bind_takes_move_loaded_on_the_command_line(tmp_path, monkeypatch):
    import etl.ops.rebind
    given: dict = {}
    monkeypatch.setattr(etl.ops.rebind, "bind", lambda config, options: given.update(options=options) or EXIT_OK)
    config = _config(tmp_path, "job", ORDERS)
    assert main(["bind", "--config", str(config.path), "--execute", "--move-loaded"]) == EXIT_OK
    assert given["options"] == BindOptions(Act.EXECUTE, data_moved=False, stop_loading=False, move_loaded=True)


@pytest.mark.parametrize("flags", [[], ["--stop-loading"]])
def test_bind_moves_nothing_unless_told(tmp_path, monkeypatch, flags):
    import etl.ops.rebind
    given: dict = {}
    monkeypatch.setattr(etl.ops.rebind, "bind", lambda config, options: given.update(options=options) or EXIT_OK)
    config = _config(tmp_path, "job", ORDERS)
    assert main(["bind", "--config", str(config.path), *flags]) == EXIT_OK
    assert given["options"].move_loaded is False and given["options"].stop_loading is bool(flags)


NEWCOMER = _route("raw", "{topic}", regex="raw_.*")  # raw_rt1-rej makes raw_rt1_rej, as rt1.rej does with RT
RT = _route("rt", "raw_{topic}", regex="rt1[.].*")


def _routed_now(config, store, *topics: str):
    """The routing every command applies to the topics Kafka lists (etl.source.topics), as the
    command's context builds it (no Kafka asked: the topics are given)."""
    from etl.context.job import JobContext
    from etl.source.topics import JobTopics
    with JobContext(config, store=store, fs=LocalFileSystem()) as context:
        return context._topic_routing().apply(JobTopics(topics))


@pytest.mark.parametrize("how", ["stop", "move"])
def test_a_new_topic_never_takes_the_table_of_a_topic_bind_stopped_or_moved(tmp_path, how):
    store = _loaded(_config(tmp_path, "before", RT + NEWCOMER), "rt1.rej")
    after = _config(tmp_path, "after", NEWCOMER + (_route("rt", "rt_moved", "rt1.rej") if how == "move" else ""))
    assert _bind(after, store, stop_loading=how == "stop", move_loaded=how == "move")[0] == EXIT_OK
    routed = _routed_now(after, store, "raw_rt1-rej", "raw_other", *(["rt1.rej"] if how == "move" else []))
    assert routed.loaded == ("raw_other", *(["rt1.rej"] if how == "move" else []))
    [refused] = routed.unroutable
    assert refused.topic == "raw_rt1-rej" and refused.why.startswith(
        "its table 'raw_rt1_rej' holds the records of topic rt1.rej, which `etl bind` stopped loading or moved"), \
        refused.why
    assert "give topic raw_rt1-rej a table of its own ([route raw] table" in refused.why


@pytest.mark.parametrize("stop_loading", [False, True])
def test_a_loaded_topic_two_routes_now_choose_is_refused_advising_to_fix_the_routes_never_to_stop_it(
        tmp_path, stop_loading):
    """The topic is still wanted (a route chooses it): what is missing is one route, or a split."""
    store = _loaded(_config(tmp_path, "before", RAW + ORDERS), "orders", "app.x")
    bound = store.operator.binding()
    both = _config(tmp_path, "both", RAW + ORDERS + _route("x", "x_{topic}", regex="app[.]x"))
    code, said = _bind(both, store, stop_loading=stop_loading)
    assert code == EXIT_USAGE and store.operator.binding() == bound, said
    refused = [line for line in said if line.startswith("refused: ")]
    assert refused == ["refused: app.x: [route raw] takes all of topic 'app.x', which [route raw] and [route x] "
                       "choose; routes that share a topic split it: give each field and values. A route still "
                       "chooses it, so it is not stopped: make one route's pattern (or topics) leave it out, or "
                       "split it by a field (field and values in each route that chooses it); nothing changed"], said
    assert not any("--stop-loading" in line for line in said), said
    with pytest.raises(BindingMismatch) as raised:  # the run's refusal says the same
        check_job_binding(bound, RouteBinding.of(both, Warehouse.of(both)), both, lambda: ["orders", "app.x"])
    assert "topic app.x cannot be routed: [route raw] takes all of topic 'app.x'" in str(raised.value)
    assert "would no longer be loaded" not in str(raised.value)


@pytest.mark.parametrize("change", ["moved", "two routes"])
def test_a_dry_run_refuses_what_the_run_refuses_with_its_message_touching_nothing(tmp_path, change):
    from etl.context.job import JobContext
    from etl.ops.dry_run import preview
    store = _loaded(_config(tmp_path, "before", RAW + ORDERS), "orders", "app.x")
    bound, events = store.operator.binding(), store.operator.events()
    after = _config(tmp_path, "after", RAW + ORDERS.replace("table = orders", "table = sales") if change == "moved"
                    else RAW + ORDERS + _route("x", "x_{topic}", regex="app[.]x"))
    with pytest.raises(BindingMismatch) as run_refused:  # the run's check (etl.job.driver.Job._check_binding)
        check_job_binding(bound, RouteBinding.of(after, Warehouse.of(after)), after, lambda: ["orders", "app.x"])
    with pytest.raises(BindingMismatch) as dry_refused:
        preview(JobContext(after, store=store, fs=LocalFileSystem(), create_nodes=False))
    assert str(dry_refused.value) == str(run_refused.value) and dry_refused.value.exit_code == 2
    assert store.operator.binding() == bound and store.operator.events() == events \
        and store.session.lock_holder() is None


def test_a_topic_that_never_loaded_a_record_is_neither_moved_nor_stopped(tmp_path):
    """An empty partition's first offset is recorded by an empty range (etl.model.planner): a
    committed offset of 0, nothing loaded. Such a topic goes to its new tables, or none, as a new one."""
    before = _config(tmp_path, "before", RAW + ORDERS)
    store = _loaded(before, "orders")
    store.session.acquire_lock()
    committed(store, batch(2, ranges=(OffsetRange("refunds", 0, 0, 0, None), OffsetRange("app.empty", 0, 7, 7, None))))
    store.session.release_lock()
    after = _config(tmp_path, "after", _route("orders", "orders", "orders") + _route("refunds", "refunds", "refunds"))
    code, said = _bind(after, store)
    assert code == EXIT_OK and said[-1] == "bound; recorded in ZooKeeper", said
    assert store.operator.binding().retired == (BoundRoute.of(before.routes.by_name("raw")),)  # removed whole, as ever
    check_job_binding(store.operator.binding(), RouteBinding.of(after, Warehouse.of(after)), after,
                      lambda: ["orders", "refunds", "app.empty"])


def test_a_topic_that_stays_in_a_table_another_topic_moved_out_of_goes_on_loading_into_it(tmp_path):
    """orders and refunds shared table orders; refunds moved out. The table holds refunds' history
    (retired) and stays orders' own: orders goes on into it, and no newcomer comes in."""
    store = _loaded(_config(tmp_path, "before", RAW + ORDERS), "orders", "refunds")
    split = _config(tmp_path, "split", RAW + ORDERS.replace("orders, refunds", "orders, returns")
                    + _route("r", "refunds_t", "refunds"))
    assert _bind(split, store, move_loaded=True)[0] == EXIT_OK
    routed = _routed_now(split, store, "orders", "refunds", "returns")
    assert routed.loaded == ("orders", "refunds") and [u.topic for u in routed.unroutable] == ["returns"], routed
    assert "its table 'orders' holds the records of topic refunds" in routed.unroutable[0].why


def test_a_loaded_topic_is_not_moved_into_a_table_that_holds_another_topics_records(tmp_path):
    store = _loaded(_config(tmp_path, "before", RAW + ORDERS), "orders", "refunds", "app.x")
    moved = _config(tmp_path, "moved", RAW + ORDERS.replace("table = orders", "table = sales"))
    assert _bind(moved, store, move_loaded=True)[0] == EXIT_OK
    bound = store.operator.binding()
    into = _config(tmp_path, "into", RAW.replace("app[.].*", "app[.]y.*")
                   + ORDERS.replace("table = orders", "table = sales") + _route("x", "orders", "app.x"))
    code, said = _bind(into, store, move_loaded=True)
    assert code == EXIT_USAGE and store.operator.binding() == bound, said
    assert "refused: app.x would load into table orders, which holds the records of topic orders, refunds" \
        in said[-1], said


def test_a_stopped_topic_routed_back_into_its_own_table_goes_on_there_and_is_no_move(tmp_path):
    """The config before --stop-loading, restored: the topic's table holds its records, and takes
    its next ones; a newcomer that makes the same table's name stays out, as the topic keeps it."""
    before = _config(tmp_path, "before", RT + NEWCOMER)
    store = _loaded(before, "rt1.rej")
    assert _bind(_config(tmp_path, "stopped", NEWCOMER), store, stop_loading=True)[0] == EXIT_OK
    code, said = _bind(before, store)
    assert code == EXIT_OK and said == ["job j1: added: [route rt] -> raw_{topic}",
                                        "bound; recorded in ZooKeeper"], said
    check_job_binding(store.operator.binding(), RouteBinding.of(before, Warehouse.of(before)), before,
                      lambda: ["rt1.rej"])
    routed = _routed_now(before, store, "rt1.rej", "raw_rt1-rej")
    assert routed.loaded == ("rt1.rej",) and routed.unroutable[0].why.endswith("rt1.rej has loaded it and keeps it")
