"""The scheduler's commands on the real stack: the lock-held exit code, `etl status --max-lag`
(exit 3), `etl history` after two batches, and the JSON of run, recover and reset-offsets."""
from __future__ import annotations

import json

from etl.cli import main
from etl.config import load_config
from etl.errors import EXIT_BATCH_FAILED, EXIT_LAG_ABOVE_MAX, EXIT_OK
from etl.state.store import ZkStateStore
from tests.harness.data import events_by_partition
from tests.harness.oracle import expected_offsets, table_offsets

DB = "etl_test"


def json_lines(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def test_lock_held_exits_with_the_code_asked_for_and_nothing_is_done(new_topic, produce, write_config, capsys):
    topic = new_topic(partitions=1)
    produce(topic, events_by_partition(1, 3))
    config = str(write_config(kafka={"topics": topic}))
    cfg = load_config(config)
    with ZkStateStore(cfg.zookeeper, cfg.job.name, cfg.retry) as holder:
        assert holder.session.acquire_lock() is None
        assert main(["run", "--config", config]) == EXIT_OK
        assert "is already running" in capsys.readouterr().out
        assert main(["run", "--config", config, "--lock-held-exit-code", "99"]) == 99
        assert main(["run", "--config", config, "--lock-held-exit-code", "99", "--json"]) == 99
        assert holder.batches.last_batch() is None
    shown = capsys.readouterr().out.splitlines()
    assert "is already running" in shown[0]
    assert json_lines(shown[1])[0]["event"] == "lock_held" and json_lines(shown[1])[0]["exit_code"] == 99


def test_a_missing_topic_exits_1_an_operator_must_act(write_config, capsys):
    assert main(["run", "--config", str(write_config(kafka={"topics": "no-such-topic-here"}))]) == EXIT_BATCH_FAILED
    assert "topic 'no-such-topic-here' does not exist" in capsys.readouterr().err


def test_status_max_lag_exits_3_naming_the_partitions_above_it(new_topic, produce, write_config, capsys):
    topic = new_topic(partitions=2)
    produce(topic, {0: events_by_partition(1, 5)[0], 1: events_by_partition(1, 2)[0]})
    config = str(write_config(kafka={"topics": topic}))
    assert main(["status", "--config", config, "--max-lag", "5"]) == EXIT_OK
    assert "every partition is at or below --max-lag 5" in capsys.readouterr().out
    assert main(["status", "--config", config, "--max-lag", "4"]) == EXIT_LAG_ABOVE_MAX
    shown = capsys.readouterr().out
    assert "total lag 7 records" in shown  # the status itself is printed as usual
    assert f"LAG ABOVE --max-lag 4 in 1 partitions: {topic}[0] (5)" in shown
    assert main(["status", "--config", config, "--max-lag", "1", "--json"]) == EXIT_LAG_ABOVE_MAX
    status = json.loads(capsys.readouterr().out)
    assert status["max_lag"] == 1 and status["over_max_lag"] == [
        {"topic": topic, "partition": 0, "lag": 5}, {"topic": topic, "partition": 1, "lag": 2}]


def test_history_json_runs_and_reports_after_two_batches(
        spark, new_topic, produce, write_config, hive_table_name, capsys):
    topic = new_topic(partitions=2)
    produce(topic, events_by_partition(2, 30))
    config = str(write_config(kafka={"topics": topic}))
    assert main(["run", "--config", config]) == EXIT_OK
    assert "COMMITTED" in capsys.readouterr().out  # the plain text stays the default
    produce(topic, events_by_partition(2, 20, first_id=100))
    assert main(["run", "--config", config, "--json"]) == EXIT_OK
    committed, phases = json_lines(capsys.readouterr().out)
    assert (committed["event"], committed["batch_id"], committed["rows"], committed["resumed"]) == \
        ("committed", 2, 40, False)
    assert phases["event"] == "phases" and phases["seconds"]["tasks"] > 0 and phases["seconds"]["commit"] > 0
    assert [step[0] for step in phases["timeline"]][-1] == "cleanup"  # the lock released, last
    assert main(["run", "--config", config, "--json"]) == EXIT_OK
    nothing, phases = json_lines(capsys.readouterr().out)
    assert nothing == {"event": "nothing_to_do", "job": load_config(config).job.name}
    assert "spark" not in phases["seconds"] and "plan" in phases["seconds"]  # nothing new: no JVM

    assert main(["history", "--config", config, "--json"]) == EXIT_OK
    batches = json.loads(capsys.readouterr().out)["batches"]
    assert [(b["batch_id"], b["state"], b["kind"], b["rows"], b["rejected"], b["records"]) for b in batches] == \
        [(2, "COMMITTED", "LOAD", 40, 0, 40), (1, "COMMITTED", "LOAD", 60, 0, 60)]
    for b in batches:
        assert b["committed_at"] >= b["planned_at"] and b["duration_seconds"] >= 0
        assert b["rows_per_second"] is None or b["rows_per_second"] > 0
    assert batches[0]["snapshot"].startswith("s-") and batches[0]["snapshot"] != batches[1]["snapshot"]
    assert main(["history", "--config", config]) == EXIT_OK
    shown = capsys.readouterr().out
    with capsys.disabled():  # shown with -s: docs/scheduling.md quotes it
        print(shown)
    assert main(["history", "--config", config, "--limit", "1"]) == EXIT_OK
    table = capsys.readouterr().out.splitlines()
    assert table[0].endswith("the last 1 batches, newest first") and "rows/s" in table[1]
    assert table[2].split()[:3] == ["2", "LOAD", "COMMITTED"] and len(table) == 3

    assert main(["recover", "--config", config, "--json"]) == EXIT_OK
    recovered = json.loads(capsys.readouterr().out)
    assert (recovered["exit_code"], recovered["open_batch"], recovered["problems"], recovered["actions"]) == \
        (0, None, [], [])
    assert main(["reset-offsets", "--config", config, "--to", f"{topic}:0=50", "--json"]) == EXIT_OK  # a preview
    reset = json.loads(capsys.readouterr().out)
    assert reset["exit_code"] == EXIT_OK and reset["applied"] is False and reset["refusals"] == []
    assert reset["changes"] == [{"topic": topic, "partition": 0, "old": 50, "new": 50, "backwards": False}]
    assert table_offsets(spark, DB, hive_table_name) == expected_offsets(topic, {0: 50, 1: 50})
