"""Many tables from one job (issue 30): the seeds' records spread over --routes-topics topics,
each into its own table by a `{topic}` route, as one `etl run` process, against the same
records in one topic and one table, and against one job per topic run one after another (the
way a team without routes runs them).

The single table's topic has as many partitions as the routed job has topics (one partition
each), so both run the same number of Spark tasks over the same records; the seeds' own 18
partitions cannot be spread evenly over 20 topics. Each job runs once first (its tables
created, not timed), then each repetition produces the records again and times the three,
interleaved, each checked for exactly the committed ranges and one row per record.
"""
from __future__ import annotations

import statistics

from etl.config.routes import table_name
from etl.config import DecoderKind
from tests.perf.common import SCHEMAS, etl_run_json, say, summarize
from tests.perf.context import BenchRun
from tests.perf.data import produce_checked, value_maker
from tests.perf.phases import check_loaded
from tests.perf.seeds_shape import SEEDS_RECORDS, _committed


def routes_bench(run: BenchRun) -> None:
    from etl.config import load_config
    count = run.args.routes_topics
    per_topic = [SEEDS_RECORDS // count + (1 if i < SEEDS_RECORDS % count else 0) for i in range(count)]
    make = value_maker("json", run.args.record_bytes)
    single = run.new_topic(count, "routes-single")
    topics = {"routed": [run.new_topic(1, f"routes-t{i:02d}") for i in range(count)],  # each job its own topics
              "separate_jobs": [run.new_topic(1, f"routes-s{i:02d}") for i in range(count)]}
    most = max(per_topic) + 1
    jobs = {"one_table": [run.ini("routes-one", [single], "json", most)],
            "routed": [_routed_ini(run, "routes-many", topics["routed"], most)],
            "separate_jobs": [run.ini(f"routes-sep{i:02d}", [topic], "json", most)
                              for i, topic in enumerate(topics["separate_jobs"])]}
    ends: dict[str, dict[int, int]] = {t: {0: 0} for ts in topics.values() for t in ts} | {single: dict.fromkeys(
        range(count), 0)}
    _produce(run, single, [], [1] * count, make, ends)  # a record each: the first runs create the tables
    for own in topics.values():
        _produce(run, None, own, [1] * count, make, ends)
    say(f"many tables: {SEEDS_RECORDS:,} JSON records as {count} topics into {count} tables in one run, "
        f"as one topic of {count} partitions into one table, and as {count} jobs run one after another")
    for inis in jobs.values():  # first runs, not timed: the tables are created, the first records loaded
        for ini in inis:
            etl_run_json(ini)
    times: dict[str, dict[str, list[float]]] = {name: {"process": [], "batch": []} for name in jobs}
    for rep in range(1, run.args.repeat + 1):
        for name, inis in jobs.items():
            expected = _produce(run, single if name == "one_table" else None, topics.get(name, []), per_topic, make,
                                ends)
            label = f"many tables: {name.replace('_', ' ')} #{rep}"
            done, stats = run.measure(label, lambda: [etl_run_json(ini) for ini in inis])
            for ini in inis:
                config = load_config(ini)
                mine = [r for r in expected if r[0] in config.kafka.topics]
                check_loaded(config, mine, sum(end - start for _t, _p, start, end in mine))
            times[name]["process"].append(stats["seconds"])
            times[name]["batch"].append(sum(_committed(d)["seconds"] for d in done))
            say(f"  {len(inis)} processes {stats['seconds']:.2f}s, batches {times[name]['batch'][-1]:.2f}s")
    report = {"records": SEEDS_RECORDS, "topics": count, "tables": count}
    for name, measured in times.items():
        report[name] = {"process_seconds": summarize(measured["process"]),
                        "batch_seconds": summarize(measured["batch"])}
    one = statistics.median(times["one_table"]["process"])
    report["routed_over_one_table"] = statistics.median(times["routed"]["process"]) / one
    report["separate_jobs_over_one_table"] = statistics.median(times["separate_jobs"]["process"]) / one
    say(f"many tables: routed / one table = {report['routed_over_one_table']:.2f}x, {count} separate jobs / one "
        f"table = {report['separate_jobs_over_one_table']:.2f}x (medians of whole processes)")
    run.report["routes"] = report


def _routed_ini(run: BenchRun, label: str, topics: list[str], most: int):
    """One job, a table per topic: the tables' names follow the topics', and are dropped after the run."""
    run.tables.extend(table_name("{topic}", topic) for topic in topics)
    route = {"topics": ", ".join(topics), "table": "{topic}", "schema": str(SCHEMAS[DecoderKind.JSON])}
    return run.ini(label, topics, "json", most, kafka_extra={"topics": None},
                   hive={"table": None, "schema": None, "rejected_table": f"{run.table_of(label)}_rejected"},
                   sections={"route all": route})


def _produce(run: BenchRun, single: str | None, topics: list[str], per_topic: list[int], make, ends) -> list:
    """The records of one repetition: into the single topic's partitions, or one topic each."""
    targets = {single: dict(enumerate(per_topic))} if single else {t: {0: n} for t, n in zip(topics, per_topic)}
    return [r for topic, counts in targets.items() for r in _produced(run, topic, counts, make, ends)]


def _produced(run: BenchRun, topic: str, counts: dict[int, int], make, ends) -> list:
    """Produce counts[p] records to each partition p of `topic` after ends[topic][p]; the ranges made."""
    produced = produce_checked(run.stack.kafka_bootstrap, topic, counts, make, start=ends[topic])
    ranges = []
    for p, (_low, high) in sorted(produced["watermarks"].items()):
        ranges.append((topic, p, ends[topic][p], high))
        ends[topic][p] = high
    return ranges


def routes_scaling(run: BenchRun) -> None:
    """Plan, tables, register and commit time for one routed job over --scaling-topics topics of
    --scaling-topic-partitions partitions, a table each by `{topic}`: the first batch creates
    every table, the second is the steady state, then a run with nothing new."""
    from etl.config import load_config
    from tests.perf.phases import run_job_timed
    from tests.perf.scaling import znode_sizes
    count, partitions, k = run.args.scaling_topics, run.args.scaling_topic_partitions, run.args.scaling_records
    make = value_maker("json", run.args.record_bytes)
    topics = [run.new_topic(partitions, f"scale-t{i:03d}") for i in range(count)]
    config = load_config(_routed_ini(run, "routes-scale", topics, 10 * k + 10))
    ends = {topic: {p: 0 for p in range(partitions)} for topic in topics}
    say(f"routed scaling: {count} topics x {partitions} partitions into {count} tables, {k} records a partition")
    batches = []
    for batch_no in (1, 2):
        expected = [r for t in topics for r in _produced(run, t, {p: k for p in range(partitions)}, make, ends)]
        label = f"routed scaling, {count} tables, batch {batch_no}"
        (phases, said), stats = run.measure(label, lambda: run_job_timed(config))
        loaded = check_loaded(config, expected, count * partitions * k)
        batches.append({"batch": batch_no, "phases": phases, **stats, "loaded": loaded,
                        "znodes": znode_sizes(run, config, loaded["batch_id"]), "job_said": said})
        say(f"  phases: {', '.join(f'{name} {seconds:.1f}s' for name, seconds in phases.items())}")
    (phases, said), stats = run.measure(f"routed scaling, {count} tables, nothing new", lambda: run_job_timed(config))
    run.report["routes_scaling"] = {"topics": count, "partitions_per_topic": partitions, "tables": count,
                                    "batches": batches, "no_data": {"phases": phases, **stats}}
