"""Throughput, on exactly the same offset ranges, repeated and interleaved so that a burst of
foreign load hits them alike: drain (the floor), drain through the ETL's reader, the full
batch (the real job), and row by row (json.loads per record, createDataFrame). The drain and
the full batch run a second time with librdkafka's own consumer defaults, which the ETL's
consumers no longer keep (etl.source.kafka.READ_TUNING), to show what that tuning is worth."""
from __future__ import annotations

import shutil
import statistics

from tests.perf.common import LIBRDKAFKA_DEFAULTS, MB, rate, say, spread, summarize
from tests.perf.context import BenchRun
from tests.perf.data import produce_checked, value_maker
from tests.perf.phases import check_loaded, run_job_timed
from tests.perf.profiling import py_spy_batch
from tests.perf.spark_tasks import drain_read_range_task, drain_task, row_schema, rows_task

LIBRDKAFKA_FETCH_BYTES = 1_048_576  # max.partition.fetch.bytes by default, which the ETL keeps


def throughput(run: BenchRun) -> None:
    args = run.args
    from etl.config import load_config
    run.start_spark()
    topic = run.new_topic(args.partitions, "data")
    per = spread(args.records, args.partitions)
    say(f"producing {args.records:,} {args.decoder} records of ~{args.record_bytes} bytes into {topic} "
        f"({args.partitions} partitions)")
    produced = produce_checked(run.stack.kafka_bootstrap, topic, dict(enumerate(per)),
                               value_maker(args.decoder, args.record_bytes))
    say(f"produced in {produced['seconds']:.1f}s ({produced['records'] / produced['seconds']:,.0f} records/s, "
        f"{produced['bytes'] / MB:.1f} MB)")
    ranges = [(topic, p, low, high) for p, (low, high) in sorted(produced["watermarks"].items())]
    records, nbytes = produced["records"], produced["bytes"]
    run.report["data"] = {"topic": topic, "records": records, "value_bytes": nbytes, "partitions": args.partitions,
                           "decoder": args.decoder, "record_bytes": args.record_bytes,
                           "produce_seconds": produced["seconds"], "ranges": ranges}
    from etl.source.kafka import READ_TUNING
    settings = {**READ_TUNING, "bootstrap.servers": run.stack.kafka_bootstrap}  # as the ETL's consumers
    untuned = {**settings, **LIBRDKAFKA_DEFAULTS}
    base_config = load_config(run.ini("base", [topic], args.decoder, max(per) + 1))
    sc = run.spark.sparkContext
    raw_specs = [(settings, t, p, s, e) for t, p, s, e in ranges]
    untuned_specs = [(untuned, t, p, s, e) for t, p, s, e in ranges]
    chunk_specs = [(base_config.kafka, t, p, s, e) for t, p, s, e in ranges]
    row_specs = [(settings, t, p, s, e, args.decoder) for t, p, s, e in ranges]

    results = {"drain": [], "drain_read_range": [], "full_batch": [], "row_by_row": [],
               "drain_librdkafka_defaults": [], "full_batch_librdkafka_defaults": []}
    for rep in range(1, args.repeat + 1):
        _, stats = run.measure(f"drain #{rep}", counted_drain(run, drain_task, raw_specs, records))
        results["drain"].append(stats)
        _, stats = run.measure(f"drain, librdkafka's defaults #{rep}",
                               counted_drain(run, drain_task, untuned_specs, records))
        results["drain_librdkafka_defaults"].append(stats)
        _, stats = run.measure(f"drain+chunk (read_range) #{rep}",
                               counted_drain(run, drain_read_range_task, chunk_specs, records))
        results["drain_read_range"].append(stats)

        run.last_full_config, measured = full_batch(run, f"full-{rep}", topic, ranges, records, per)
        results["full_batch"].append(measured)
        say("  phases: " + ", ".join(f"{k} {v:.2f}s" for k, v in measured["phases"].items() if "." not in k))
        _, measured = full_batch(run, f"untuned-{rep}", topic, ranges, records, per, LIBRDKAFKA_DEFAULTS)
        results["full_batch_librdkafka_defaults"].append(measured)

        out = run.work / f"row-by-row-{rep}"

        def row_by_row():
            rdd = sc.parallelize(row_specs, len(row_specs)).flatMap(rows_task)
            run.spark.createDataFrame(rdd, row_schema(args.decoder)).write.parquet(f"file://{out}")
        _, stats = run.measure(f"row-by-row #{rep}", row_by_row)
        written = run.spark.read.parquet(f"file://{out}").count()
        if written != records:
            raise RuntimeError(f"row-by-row wrote {written} rows, expected {records}")
        shutil.rmtree(out, ignore_errors=True)
        results["row_by_row"].append(stats)

    summary = {}
    for name, runs in results.items():
        key = "batch" if name.startswith("full_batch") else None
        seconds = [r["phases"][key] for r in runs] if key else [r["seconds"] for r in runs]
        entry = {"seconds": summarize(seconds), **rate(records, nbytes, statistics.median(seconds)),
                 "loadavg_before": [r["loadavg_before"][0] for r in runs],
                 "foreign_cpu_cores": [r["foreign_cpu_cores"] for r in runs],
                 "own_cpu_cores": [r["own_cpu_cores"] for r in runs],
                 "stack_cpu_cores": [r["stack_cpu_cores"] for r in runs],
                 "quiet_before": [r["quiet_before"] for r in runs]}
        if name.startswith("full_batch"):
            entry["phases_median"] = {k: statistics.median(r["phases"][k] for r in runs) for k in runs[0]["phases"]}
            entry["phases_runs"] = [r["phases"] for r in runs]
            entry["run_total_rate"] = rate(records, nbytes, entry["phases_median"]["run_minus_tables"])
            entry["peak_worker_rss_mb"] = summarize([r["peak_worker_rss_mb"] for r in runs])
            entry["peak_workers_total_rss_mb"] = summarize([r["peak_workers_total_rss_mb"] for r in runs])
            entry["job_said"] = runs[-1]["job_said"]
            entry["loaded"] = [r["loaded"] for r in runs]
        summary[name] = entry
    median = {k: v["seconds"]["median"] for k, v in summary.items()}
    summary["best_drain"] = best_drain(run, raw_specs, records, nbytes, [r["seconds"] for r in results["drain"]])
    summary["ratios"] = {
        "full_batch_vs_drain": median["drain"] / median["full_batch"],
        "full_batch_vs_best_drain": summary["best_drain"]["seconds"]["median"] / median["full_batch"],
        "full_batch_vs_row_by_row": median["row_by_row"] / median["full_batch"],
        "full_batch_vs_librdkafka_defaults": median["full_batch_librdkafka_defaults"] / median["full_batch"],
        "drain_vs_librdkafka_defaults": median["drain_librdkafka_defaults"] / median["drain"],
        "drain_read_range_vs_drain": median["drain"] / median["drain_read_range"],
        "full_run_total_vs_drain": median["drain"] / summary["full_batch"]["phases_median"]["run_minus_tables"],
    }
    run.report["throughput"] = summary
    if args.py_spy:
        config = load_config(run.ini("py-spy", [topic], args.decoder, max(per) + 1))
        run.report["py_spy"] = py_spy_batch(run, config)


def full_batch(run: BenchRun, label: str, topic: str, ranges: list, records: int, per: list[int],
               kafka_extra: dict | None = None):
    """One measurement of the full batch in a job of its own (kafka_extra added to its [kafka]
    section): the job's config, and what was measured."""
    from etl.config import load_config
    config = load_config(run.ini(label, [topic], run.args.decoder, max(per) + 1, kafka_extra=kafka_extra))
    (phases, said), stats = run.measure(f"full batch {label}", lambda: run_job_timed(config), workers=True)
    loaded = check_loaded(config, ranges, records)
    return config, {**stats, "phases": phases, "job_said": said, "loaded": loaded}


def counted_drain(run: BenchRun, task, specs: list, records: int):
    """A measurement: the specs' ranges consumed by one Spark task each, counted."""
    def go():
        counted = run.spark.sparkContext.parallelize(specs, len(specs)).map(task).collect()
        got = sum(c for c, _ in counted)
        if got != records:
            raise RuntimeError(f"drain counted {got} records, expected {records}")
        return counted
    return go


def best_drain(run: BenchRun, specs: list, records: int, nbytes: int, same_settings: list[float]) -> dict:
    """The drain at each --drain-parallelism and each --drain-fetch-bytes, a Spark session of its
    own per parallelism: more consumers in flight than cores drain faster while they wait on the
    broker, and larger fetches cost fewer round trips. The best is the physical limit the full
    batch is compared with, beside the drain at its own settings (the ETL's consumer settings)."""
    by = {(run.args.parallelism, LIBRDKAFKA_FETCH_BYTES): summarize(same_settings)}
    for parallelism in run.args.drain_parallelism:
        if all((parallelism, fetch) in by for fetch in run.args.drain_fetch_bytes):
            continue
        run.start_spark(parallelism)
        for fetch in run.args.drain_fetch_bytes:
            if (parallelism, fetch) in by:
                continue
            fetched = [(dict(settings, **{"max.partition.fetch.bytes": str(fetch)}), *rest)
                       for settings, *rest in specs]
            by[(parallelism, fetch)] = summarize([
                run.measure(f"drain at local[{parallelism}], fetches of {fetch / 2**20:g} MiB #{rep}",
                            counted_drain(run, drain_task, fetched, records))[1]["seconds"]
                for rep in range(1, run.args.repeat + 1)])
    run.start_spark()  # back to --parallelism for what follows
    best = min(by, key=lambda key: by[key]["median"])
    return {"by_settings": [{"parallelism": p, "max_partition_fetch_bytes": f, "seconds": s}
                            for (p, f), s in sorted(by.items())],
            "parallelism": best[0], "max_partition_fetch_bytes": best[1],
            "seconds": by[best], **rate(records, nbytes, by[best]["median"])}
