"""The fixed cost of a scheduled `etl run`, phase by phase, from exec to exit (`--fixed-cost`).

Three jobs, as a schedule runs them, each a whole `etl run --json` process that has run before
(its tables exist): one with nothing new, one with one new record, and the seeds' shape (545,884
records in 18 partitions). Repetitions are interleaved, so that a burst of foreign load hits the
three alike. The run's last JSON line places each of its phases on the system's monotonic clock
(etl.job.observer.PhaseTimeline), which this process shares: so the table also has what no phase
covers, from exec to the first phase (the interpreter, the imports, the config, the ZooKeeper
session) and from the last phase to exit (Spark's stop, the JVM's and the interpreter's exit).
"""
from __future__ import annotations

import json
import statistics
import subprocess
import time

from etl.job.observer import Phase
from tests.perf.common import etl_run_json, say, spread, summarize
from tests.perf.context import BenchRun
from tests.perf.data import produce_checked, value_maker
from tests.perf.seeds_shape import SEEDS_PARTITIONS, SEEDS_RECORDS

START = "exec to the first phase (interpreter, imports, config, ZooKeeper)"
GAPS = "between phases"
EXIT = "last phase to exit (Spark's stop, the JVM's and the interpreter's exit)"
WHOLE = "whole process"
ROWS = (START, *(phase.value for phase in Phase), GAPS, EXIT, WHOLE)


def process_phases(run: BenchRun) -> None:
    """Each job once per variant (the default, then each --variant), interleaved by repetition."""
    jobs = {"nothing new": ("idle", 1, 0), "one record": ("one", 1, 1),
            "seeds' shape": ("seeds", SEEDS_PARTITIONS, SEEDS_RECORDS)}
    make = value_maker("json", run.args.record_bytes)
    state = {}
    for variant, env in variants(run.args.variant).items():
        for label, (name, partitions, records) in jobs.items():
            column, job_name = (label, f"fixed-{name}") if not variant else \
                (f"{label}, {variant}", f"fixed-{name}-{variant}")
            topic = run.new_topic(partitions, job_name)
            produce_checked(run.stack.kafka_bootstrap, topic, {p: 1 for p in range(partitions)}, make)
            ini = run.ini(job_name, [topic], "json", SEEDS_RECORDS)
            _phases_of(etl_run_json(ini, env))  # the first run: tables created, the first records loaded
            state[column] = {"topic": topic, "ini": ini, "env": env, "partitions": partitions, "records": records,
                             "ends": {p: 1 for p in range(partitions)}, "runs": []}
    for rep in range(1, run.args.repeat + 1):
        for column, job in state.items():
            if job["records"]:
                partitions, records = job["partitions"], job["records"]
                per = dict(enumerate(spread(records, partitions)))
                produced = produce_checked(run.stack.kafka_bootstrap, job["topic"], per, make, start=job["ends"])
                job["ends"] = {p: high for p, (_low, high) in produced["watermarks"].items()}
            timed, _stats = run.measure(f"fixed cost, {column} #{rep}", lambda: _timed_run(job["ini"], job["env"]))
            job["runs"].append(timed)
            say("  " + ", ".join(f"{k.split(' (')[0]} {v:.2f}s" for k, v in timed.items() if v >= 0.05))
    run.report["process_phases"] = {column: {row: summarize([r.get(row, 0.0) for r in job["runs"]]) for row in ROWS}
                                    for column, job in state.items()}
    if run.args.variant:
        run.report["process_phase_variants"] = {name: env for name, env in variants(run.args.variant).items() if name}
    say("\n" + render(run.report["process_phases"]))
    for line in ratios(run.report["process_phases"], list(jobs), [name for name in variants(run.args.variant) if name]):
        say(line)


def ratios(report: dict, jobs: list[str], named: list[str]) -> list[str]:
    """Each variant's whole-process median against the default's, job by job (one run's medians)."""
    def whole(column: str) -> float:
        return statistics.median(report[column][WHOLE]["runs"])
    return [f"{variant}: " + ", ".join(f"{job} {whole(f'{job}, {variant}'):.2f} s against {whole(job):.2f} s "
                                       f"({whole(f'{job}, {variant}') / whole(job):.2f}x)" for job in jobs)
            for variant in named]


def variants(given: list[list[str]]) -> dict[str, dict[str, str]]:
    """The default (named "") and each `--variant NAME VAR=VALUE ...`, as environment overrides."""
    chosen = {"": {}}
    for name, *assignments in given:
        malformed = [a for a in assignments if "=" not in a]
        if not assignments or malformed:
            raise SystemExit(f"--variant {name}: give VAR=value (ETL__SECTION__KEY=value ...), "
                             f"not {malformed or 'none'}")
        chosen[name] = dict(a.split("=", 1) for a in assignments)
    return chosen


def _timed_run(ini, env: dict[str, str]) -> dict[str, float]:
    started = time.monotonic()
    done = etl_run_json(ini, env)
    ended = time.monotonic()
    return split(_phases_of(done), started, ended)


def _phases_of(done: subprocess.CompletedProcess) -> dict:
    records = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if not records or records[-1].get("event") != "phases":
        raise RuntimeError(f"etl run --json did not end with its phases:\n{done.stdout[-2000:]}")
    return records[-1]


def split(phases: dict, started: float, ended: float) -> dict[str, float]:
    """The process's seconds by row of the table: each phase summed, and what no phase covers."""
    timeline = phases["timeline"]
    first = min(at for _, at, _ in timeline)
    last = max(at + seconds for _, at, seconds in timeline)
    rows = {START: first - started, **phases["seconds"]}
    rows[GAPS] = (last - first) - _covered(timeline)
    rows[EXIT] = ended - last
    rows[WHOLE] = ended - started
    return rows


def _covered(timeline: list) -> float:
    """Seconds of [first, last] inside some phase (phases may nest: count each moment once)."""
    spans = sorted((at, at + seconds) for _, at, seconds in timeline)
    covered, reach = 0.0, spans[0][0]
    for begin, end in spans:
        if end > reach:
            covered += end - max(begin, reach)
            reach = end
    return covered


def render(report: dict) -> str:
    """The phase table (medians), a column per job."""
    labels = list(report)
    lines = [f"| phase (median of {len(next(iter(report.values()))[WHOLE]['runs'])}) | " + " | ".join(labels) + " |",
             "|---|" + "---:|" * len(labels)]
    for row in ROWS:
        medians = [statistics.median(report[label][row]["runs"]) for label in labels]
        if row in (START, GAPS, EXIT, WHOLE) or max(medians) >= 0.005:
            lines.append(f"| {row} | " + " | ".join(f"{m:.2f} s" for m in medians) + " |")
    return "\n".join(lines)
