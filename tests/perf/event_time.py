"""Event-time partitioning: what placing rows by their own time costs.

  throughput  the same 1M records, their ts spread over 3 hours, loaded by the full batch with
              [hive] partition_by = planning_time and = column:ts, interleaved; medians, ratio
  memory      peak Python worker RSS for one partition-batch whose rows fall in 1 hourly
              partition, and one whose rows fall in 720 (30 days), [hive] max_open_partition_files
              at its default: the ratio is the target (flat memory)
"""
from __future__ import annotations

import statistics

from tests.perf.common import say, summarize
from tests.perf.context import BenchRun
from tests.perf.data import produce_checked
from tests.perf.phases import check_loaded, run_job_timed

EVENT_TIME = {"partition_by": "column:ts"}


def timed_value_maker(record_bytes: int, hours: int):
    """JSON events like tests.harness.data.event, ts spread round-robin over `hours` hours
    (one minute apart within an hour), padded to record_bytes."""
    def make(i: int) -> bytes:
        hour, minute = i % hours, (i // hours) % 60
        day, hour = 1 + hour // 24, hour % 24
        head = (f'{{"event_id": {i}, "user_id": "u{i % 7}", "action": "click", "amount": {i / 10!r}, '
                f'"ts": "2026-10-{day:02d} {hour:02d}:{minute:02d}:00", "ok": true')
        room = record_bytes - len(head) - len(', "pad": ""}')
        return (head + (f', "pad": "{"x" * room}"}}' if room > 0 else "}")).encode()
    return make


def event_time_bench(run: BenchRun) -> None:
    run.start_spark()
    run.report["event_time"] = {"throughput": _throughput(run), "memory": _memory(run)}


def _throughput(run: BenchRun) -> dict:
    from etl.config import load_config
    args = run.args
    topic = run.new_topic(args.partitions, "event-time")
    per = {p: args.records // args.partitions for p in range(args.partitions)}
    say(f"producing {sum(per.values()):,} records, ts over 3 hours, into {topic}")
    produced = produce_checked(run.stack.kafka_bootstrap, topic, per, timed_value_maker(args.record_bytes, 3))
    ranges = [(topic, p, low, high) for p, (low, high) in sorted(produced["watermarks"].items())]
    seconds = {"planning_time": [], "column": []}
    for rep in range(1, args.repeat + 1):
        for label, hive in (("planning_time", None), ("column", EVENT_TIME)):
            config = load_config(run.ini(f"et-{label}-{rep}", [topic], "json", max(per.values()) + 1, hive=hive))
            (phases, _said), _stats = run.measure(f"full batch, {label} #{rep}", lambda: run_job_timed(config),
                                                   workers=True)
            check_loaded(config, ranges, produced["records"])
            seconds[label].append(phases["batch"])
    median = {label: statistics.median(values) for label, values in seconds.items()}
    ratio = median["planning_time"] / median["column"]
    say(f"event time: column batch {median['column']:.2f}s vs planning_time {median['planning_time']:.2f}s "
        f"(median): {ratio:.2f}x the planning_time speed")
    run.delete_topic(topic)
    return {"records": produced["records"], "seconds": {k: summarize(v) for k, v in seconds.items()},
            "column_speed_vs_planning_time": ratio}


def _memory(run: BenchRun) -> dict:
    from etl.config import load_config
    n = run.args.event_memory_records
    out = {}
    for hours in (1, 720):
        label = f"et-mem-{hours}"
        topic = run.new_topic(1, label)
        produced = produce_checked(run.stack.kafka_bootstrap, topic, {0: n}, timed_value_maker(run.args.record_bytes,
                                                                                               hours))
        config = load_config(run.ini(label, [topic], "json", n + 1, hive=EVENT_TIME))
        (phases, _said), stats = run.measure(f"full batch, one range over {hours} hourly partitions",
                                             lambda: run_job_timed(config), workers=True)
        check_loaded(config, [(topic, 0, *produced["watermarks"][0])], n)
        out[hours] = {"records": n, "batch_seconds": phases["batch"], "peak_worker_rss_mb": stats["peak_worker_rss_mb"]}
        run.delete_topic(topic)
    out["rss_ratio_720_vs_1"] = out[720]["peak_worker_rss_mb"] / out[1]["peak_worker_rss_mb"]
    say(f"event time memory: peak worker RSS {out[1]['peak_worker_rss_mb']:.0f} MB (1 partition) vs "
        f"{out[720]['peak_worker_rss_mb']:.0f} MB (720 partitions): {out['rss_ratio_720_vs_1']:.2f}x")
    return out
