"""--rollups: what a rollup costs a batch (docs/rollups.md): the full batch of --records JSON events
into a table of its own with and without a rollup, interleaved, --repeat times each, on one topic.

The rollup groups the events by user and hour and keeps a count, a sum and a maximum:
each range's task reads its published file back for four columns and writes one small partials
file. Every run is checked: its batch committed exactly the produced ranges (check_loaded), and
with the rollup, one partials file per range whose counts add up to the rows loaded.
"""
from __future__ import annotations

import statistics
from pathlib import Path

import pyarrow.parquet as pq

from tests.perf.common import say, spread
from tests.perf.context import BenchRun
from tests.perf.data import produce_checked, value_maker
from tests.perf.phases import check_loaded, run_job_timed

ROLLUP = {"where": "amount >= 0", "group_by": "user_id, hour(ts)",
          "aggregates": "count(*) as events, sum(amount) as amount, max(event_id) as last"}


def rollups_bench(run: BenchRun) -> None:
    from etl.config import load_config
    args = run.args
    run.start_spark()
    topic = run.new_topic(args.partitions, "rollups")
    per = spread(args.records, args.partitions)
    produced = produce_checked(run.stack.kafka_bootstrap, topic, dict(enumerate(per)), value_maker("json", 130))
    ranges = [(topic, p, low, high) for p, (low, high) in sorted(produced["watermarks"].items())]
    results: dict[str, list[dict]] = {"plain": [], "rollup": []}
    for rep in range(args.repeat):
        for variant in results:
            label = f"{variant}-{rep}"
            view = f"{run.table_of(label)}_per_hour"
            sections = {"rollup per_hour": {**ROLLUP, "table": view}} if variant == "rollup" else {}
            config = load_config(run.ini(label, [topic], "json", max(per) + 1, sections=sections))
            (phases, _said), stats = run.measure(f"full batch, {variant} {rep}", lambda: run_job_timed(config),
                                                 workers=True)
            loaded = check_loaded(config, ranges, produced["records"])
            partials = _check_partials(Path(run.work) / "warehouse" / f"{run.database}.db" / f"{view}_partials",
                                       len(ranges), loaded) if variant == "rollup" else {}
            if variant == "rollup":
                run.tables.append(f"{view}_partials")
                run.spark.sql(f"DROP VIEW IF EXISTS `{run.database}`.`{view}`")
            results[variant].append({**stats, "tasks_seconds": phases["tasks"], "batch_seconds": phases["batch"],
                                     **partials})
    run.report["rollups"] = _summary(results, produced["records"])


def _check_partials(folder: Path, ranges: int, loaded: dict) -> dict:
    files = sorted(folder.rglob("*.parquet"))
    counted = sum(sum(pq.read_table(path, columns=["events"])["events"].to_pylist()) for path in files)
    if len(files) != ranges or counted != loaded["rows"]:
        raise RuntimeError(f"{folder}: {len(files)} partials for {ranges} ranges, counting {counted} rows of "
                           f"{loaded['rows']}")
    return {"partials": len(files), "partials_bytes": sum(path.stat().st_size for path in files)}


def _summary(results: dict[str, list[dict]], records: int) -> dict:
    summary = {}
    for variant, runs in results.items():
        seconds = statistics.median(r["seconds"] for r in runs)
        tasks = statistics.median(r["tasks_seconds"] for r in runs)
        summary[variant] = {"seconds": [r["seconds"] for r in runs], "median_seconds": seconds,
                            "records_per_second": records / seconds, "tasks_median_seconds": tasks,
                            "batch_median_seconds": statistics.median(r["batch_seconds"] for r in runs),
                            **{k: runs[0][k] for k in ("partials", "partials_bytes") if k in runs[0]}}
        say(f"{variant}: full batch median {seconds:.2f}s ({records / seconds:,.0f} records/s), tasks {tasks:.2f}s")
    for what in ("median_seconds", "tasks_median_seconds", "batch_median_seconds"):
        summary[f"rollup_vs_plain_{what}"] = summary["rollup"][what] / summary["plain"][what]
    say("with the rollup / without: {:.3f}x the run's seconds, {:.3f}x the tasks', {:.3f}x the batch's".format(
        *(summary[f"rollup_vs_plain_{w}"] for w in ("median_seconds", "tasks_median_seconds", "batch_median_seconds"))))
    return summary
