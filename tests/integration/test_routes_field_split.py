"""Issue 30, a topic split among tables by a field, on the real stack: one topic's records go by
their `action` to three tables (a value listed by each of two routes, every other value to a
third, `values = *`), beside a topic routed whole to its own table, in one batch and one commit;
a record whose route's decoder refuses it goes to the rejected table, its reason naming the
route. Then a second job with no `*` route rejects the values no route lists, with the reason; it
writes `_SUCCESS` in each table's closed hour, and its metrics count rows per table.
Every offset is once in its table or in the rejected table (tests.harness.oracle)."""
from __future__ import annotations

import datetime as dt
import json
import uuid
from collections import Counter

from prometheus_client.parser import text_string_to_metric_families

from etl.config import load_config
from etl.model.batch import utc_now
from etl.ops.metrics import published_metrics
from etl.ops.run import run_job
from etl.sink.markers import MARKER_NAME
from tests.harness.etl_process import etl_command, run_etl
from tests.harness.oracle import check_exactly_once, hive_reader
from tests.harness.paths import EVENTS_SCHEMA

DB = "etl_test"
ACTIONS = ["click", "view", "look", "buy", None]


def _event(i: int) -> bytes:
    action = ACTIONS[i % len(ACTIONS)]
    event = {"event_id": i if i % 11 else f"bad{i}", "user_id": f"u{i % 7}", "ts": "2026-11-21 10:00:00"}
    return json.dumps({**event, **({"action": action} if action else {})}).encode()


def _split(topic: str, name: str, rest: bool) -> dict:
    def route(values: str, table: str) -> dict:
        return {"topics": topic, "field": "action", "values": values, "table": table, "schema": str(EVENTS_SCHEMA)}
    routes = {"route clicks": route("click", f"{name}_clicks"), "route views": route("view, look", f"{name}_views")}
    return {**routes, **({"route other": route("*", f"{name}_other")} if rest else {})}


def _produced(produce, topic: str, count: int) -> Counter:
    delivered = produce(topic, {0: [_event(i) for i in range(count)], 1: [_event(i) for i in range(count, 2 * count)]})
    return Counter({(topic, p, o): 1 for p, o in delivered})


def test_one_topic_split_by_a_field_into_three_tables_and_one_routed_whole(spark, new_topic, produce, write_config,
                                                                        warehouse_dir):
    name = f"fs{uuid.uuid4().hex[:8]}"
    events, whole = new_topic(2, f"{name}.events"), new_topic(2, f"{name}.whole")
    expected = _produced(produce, events, 40) + _produced(produce, whole, 10)
    config = write_config(kafka={"topics": None}, job={"max_rejected_ratio": "0.9"},
                          hive={"table": None, "schema": None, "rejected_table": f"{name}_rejected"},
                          **_split(events, name, rest=True),
                          **{"route whole": {"topics": whole, "table": f"{name}_whole", "schema": str(EVENTS_SCHEMA)}})
    run = run_etl(config)
    assert run.returncode == 0, run.describe()
    oracle = check_exactly_once(hive_reader(spark), config, expected, warehouse_dir)
    by_table = {table: sorted({r[0] for r in spark.sql(f"SELECT DISTINCT action FROM {DB}.{name}_{table}").collect()},
                              key=str) for table in ("clicks", "views", "other")}
    assert by_table == {"clicks": ["click"], "views": ["look", "view"], "other": [None, "buy"]}, by_table
    reasons = [r[0] for r in spark.sql(f"SELECT error FROM {DB}.{name}_rejected").collect()]
    assert reasons and all(reason.startswith("[route ") and "event_id" in reason for reason in reasons), reasons
    history = etl_command(config, "history")
    # 2 of the whole-routed topic's 20 records have a bad event_id
    assert f"{name}_clicks" in history.stdout and f"{name}_whole 18" in history.stdout, history.stdout
    print(f"[field-split] {oracle.describe()}; rows by table {by_table}")
    _deleted_by_hand_then_recovered(spark, config, expected, warehouse_dir, name, events, whole)
    _reset_back_over_a_split_range(spark, config, expected, warehouse_dir, events)


def _deleted_by_hand_then_recovered(spark, config, expected, warehouse_dir, name, events, whole):
    """An operator deletes the whole-routed topic's file of partition 0, and one split range's
    part in the clicks table only (the views and other tables keep theirs). `etl verify` names
    both; `etl recover` moves the split range's other parts out and rewrites both ranges from
    Kafka, each into its tables; then every offset is once in its table again."""
    gone = [*(warehouse_dir / f"{DB}.db" / f"{name}_whole").rglob(f"{whole}+0+*.parquet"),
            *(warehouse_dir / f"{DB}.db" / f"{name}_clicks").rglob(f"{events}+1+*.parquet")]
    assert len(gone) == 2, gone
    for path in gone:
        path.unlink()
    verify = etl_command(config, "verify")
    assert verify.returncode == 1 and "[gap]" in verify.stdout and "[missing_part]" in verify.stdout, verify.describe()
    recover = etl_command(config, "recover", "--execute")
    assert recover.returncode == 0 and "rewrite 2 committed ranges that no file covers" in recover.stdout, \
        recover.describe()
    assert "batch 2 REPAIR PLANNED: 2 ranges" in recover.stderr, recover.describe()
    # the split range's parts in the views and other tables, its rejected file and its manifest; the
    # whole topic's rejected file (its record 0 has a bad event_id), whose main file is gone
    assert "moved 5 files out of the table" in recover.stdout, recover.stdout
    oracle = check_exactly_once(hive_reader(spark), config, expected, warehouse_dir)
    print(f"[field-split] two files deleted by hand, recovered: {oracle.describe()}")


def test_without_a_rest_route_an_unlisted_value_is_rejected_with_why(spark, new_topic, produce, write_config,
                                                                    warehouse_dir, tmp_path):
    """In process, its clock frozen an hour that has closed since (as tests/integration/test_markers.py):
    then a run with nothing new, by the real clock, writes each table's marker."""
    name = f"fs{uuid.uuid4().hex[:8]}"
    events = new_topic(2, f"{name}.events")
    expected = _produced(produce, events, 20)
    textfile = tmp_path / "etl_job.prom"
    config = write_config(kafka={"topics": None}, job={"max_rejected_ratio": "0.9"},
                          metrics={"textfile": str(textfile)},
                          hive={"table": None, "schema": None, "rejected_table": f"{name}_rejected",
                                "success_markers": "true", "success_marker_delay_seconds": "0"},
                          **_split(events, name, rest=False))
    planned = utc_now().replace(minute=30, second=0, microsecond=0) - dt.timedelta(hours=3)
    with published_metrics(load_config(config)) as observer:  # as `etl run` publishes them
        assert run_job(load_config(config), observer=observer, clock=lambda: planned) == 0
    check_exactly_once(hive_reader(spark), config, expected, warehouse_dir)
    reasons = Counter(r[0].split(" (")[0] for r in spark.sql(f"SELECT error FROM {DB}.{name}_rejected").collect())
    assert reasons["no route takes action = 'buy'"] > 0, reasons
    assert reasons["action is missing, and no route takes the rest"] > 0, reasons
    tables = [f"{name}_clicks", f"{name}_views", f"{name}_rejected"]
    published = {(s.name, s.labels.get("table")): s.value for f in text_string_to_metric_families(textfile.read_text())
                 for s in f.samples if s.name in ("etl_run_rows", "etl_run_rejected_rows", "etl_run_offsets")}
    counts = {table: spark.sql(f"SELECT count(*) FROM {DB}.{table}").collect()[0][0] for table in tables}
    assert published == {("etl_run_rows", f"{DB}.{name}_clicks"): counts[tables[0]],
                         ("etl_run_rows", f"{DB}.{name}_views"): counts[tables[1]],
                         ("etl_run_rejected_rows", f"{DB}.{name}_rejected"): counts[tables[2]],
                         ("etl_run_offsets", ""): 40}, published

    def marked() -> list[str]:
        hour = f"dt={planned:%Y-%m-%d}/hour={planned:%H}/{MARKER_NAME}"
        return [table for table in tables if (warehouse_dir / f"{DB}.db" / table / hour).exists()]
    assert marked() == []  # the hour is still open by the run's clock
    assert run_job(load_config(config)) == 0  # nothing new; the hour has closed by the real clock
    assert marked() == tables  # each table's own, and the rejected table's


def _reset_back_over_a_split_range(spark, config, expected, warehouse_dir, events):
    """`etl reset-offsets` back to the start of the split topic's partition 1 moves its range's
    parts out of every table (with its rejected file and manifest), and the next run loads the
    range again: still once."""
    reset = etl_command(config, "reset-offsets", "--to", f"{events}:1=0", "--move-aside", "--execute")
    assert reset.returncode == 0, reset.describe()
    moved = [line for line in reset.stdout.splitlines() if line.startswith("move out of the table:")]
    assert len(moved) == 5, reset.stdout  # the clicks, views and other parts, the rejected file, the manifest
    rerun = run_etl(config)
    assert rerun.returncode == 0 and "COMMITTED" in rerun.stdout, rerun.describe()
    oracle = check_exactly_once(hive_reader(spark), config, expected, warehouse_dir)
    print(f"[field-split] reset back over a split range, loaded again: {oracle.describe()}")
