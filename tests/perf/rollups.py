"""--rollups: what a rollup costs a batch (docs/rollups.md): the full batch of --records JSON events
into a table of its own without a rollup, with one in Hive, and with one in Hive and PostgreSQL
(the local stack's, `scripts/local-stack up postgres`), interleaved, --repeat times each, on one
topic.

The rollup groups the events by user and hour and keeps a count, a sum and a maximum:
each range's task reads its published file back for four columns and writes one small partials
file; with the target, the driver merges the batch's partials and upserts them with its offsets
in one transaction (the `commit` phase, with ZooKeeper's commit). Every run is checked: its batch
committed exactly the produced ranges (check_loaded); with the rollup, one partials file per range
whose counts add up to the rows loaded; with the target, the database's counts too.
"""
from __future__ import annotations

import statistics
from pathlib import Path

import pyarrow.parquet as pq

from tests.harness.postgres import StackPostgres
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
    results: dict[str, list[dict]] = {"plain": [], "rollup": [], "postgres": []}
    with StackPostgres() as postgres:
        for rep in range(args.repeat):
            for variant in results:
                label = f"{variant}-{rep}"
                view = f"{run.table_of(label)}_per_hour"
                rollup = {**ROLLUP, "table": view}
                if variant == "postgres":
                    rollup["target"] = postgres.create_database(run.table_of(label))
                sections = {"rollup per_hour": rollup} if variant != "plain" else {}
                config = load_config(run.ini(label, [topic], "json", max(per) + 1, sections=sections))
                (phases, _said), stats = run.measure(f"full batch, {variant} {rep}", lambda: run_job_timed(config),
                                                     workers=True)
                loaded = check_loaded(config, ranges, produced["records"])
                checked = {} if variant == "plain" else _check_partials(
                    Path(run.work) / "warehouse" / f"{run.database}.db" / f"{view}_partials", len(ranges), loaded)
                if variant == "postgres":
                    _check_database(rollup["target"], view, loaded)
                if variant != "plain":
                    run.tables.append(f"{view}_partials")
                    run.spark.sql(f"DROP VIEW IF EXISTS `{run.database}`.`{view}`")
                results[variant].append({**stats, "tasks_seconds": phases["tasks"], "batch_seconds": phases["batch"],
                                         "commit_seconds": phases["commit"], **checked})
    run.report["rollups"] = _summary(results, produced["records"])


def _check_partials(folder: Path, ranges: int, loaded: dict) -> dict:
    files = sorted(folder.rglob("*.parquet"))
    counted = sum(sum(pq.read_table(path, columns=["events"])["events"].to_pylist()) for path in files)
    if len(files) != ranges or counted != loaded["rows"]:
        raise RuntimeError(f"{folder}: {len(files)} partials for {ranges} ranges, counting {counted} rows of "
                           f"{loaded['rows']}")
    return {"partials": len(files), "partials_bytes": sum(path.stat().st_size for path in files)}


def _check_database(url: str, table: str, loaded: dict) -> None:
    import psycopg
    with psycopg.connect(url) as connection:
        counted = connection.execute(f'SELECT sum(events) FROM "{table}"').fetchone()[0]
    if counted != loaded["rows"]:
        raise RuntimeError(f"{url} {table}: its counts add up to {counted} rows of {loaded['rows']}")


def _summary(results: dict[str, list[dict]], records: int) -> dict:
    summary = {}
    for variant, runs in results.items():
        seconds = statistics.median(r["seconds"] for r in runs)
        tasks = statistics.median(r["tasks_seconds"] for r in runs)
        summary[variant] = {"seconds": [r["seconds"] for r in runs], "median_seconds": seconds,
                            "records_per_second": records / seconds, "tasks_median_seconds": tasks,
                            "batch_median_seconds": statistics.median(r["batch_seconds"] for r in runs),
                            "commit_median_seconds": statistics.median(r["commit_seconds"] for r in runs),
                            **{k: runs[0][k] for k in ("partials", "partials_bytes") if k in runs[0]}}
        say(f"{variant}: full batch median {seconds:.2f}s ({records / seconds:,.0f} records/s), tasks {tasks:.2f}s, "
            f"commit {summary[variant]['commit_median_seconds']:.3f}s")
    whats = ("median_seconds", "tasks_median_seconds", "batch_median_seconds", "commit_median_seconds")
    for variant in ("rollup", "postgres"):
        for what in whats:
            summary[f"{variant}_vs_plain_{what}"] = summary[variant][what] / summary["plain"][what]
        say(f"{variant} / plain: " + ", ".join(f"{summary[f'{variant}_vs_plain_{w}']:.3f}x {w}" for w in whats))
    return summary
