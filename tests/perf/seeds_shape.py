"""The batch shape of the system the design comes from: 545,884 records over 18 partitions,
one 5-minute batch (51 s on that cluster). Each run is a whole `etl run` process of a job that
has run before, as a schedule runs it, so its time includes the interpreter, Spark's start-up
and the Hive table check; the batch's own time (plan stored to commit) is what the job
reports for it. Each repetition also times one run with librdkafka's own consumer defaults
(the environment overrides the ETL's fetch.queue.backoff.ms), on records of its own."""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

from tests.harness.paths import ETL as ETL_CLI
from tests.perf.common import LIBRDKAFKA_DEFAULTS, say, summarize
from tests.perf.context import BenchRun
from tests.perf.data import produce_checked, value_maker
from tests.perf.phases import check_loaded

SEEDS_RECORDS, SEEDS_PARTITIONS = 545_884, 18
# The job's one INI serves both variants (its state runs on), so the environment overrides it.
LIBRDKAFKA_DEFAULTS_ENV = {f"ETL__KAFKA__{key.upper().replace('.', '_')}": value
                           for key, value in LIBRDKAFKA_DEFAULTS.items()}


def seeds_shape(run: BenchRun) -> None:
    """Per parallelism, one job as a schedule runs it: a first run creates its tables (not
    timed), then each repetition produces the shape's records and times one `etl run`."""
    from etl.config import load_config
    topic = run.new_topic(SEEDS_PARTITIONS, "seeds")
    per = {p: SEEDS_RECORDS // SEEDS_PARTITIONS + (1 if p < SEEDS_RECORDS % SEEDS_PARTITIONS else 0)
           for p in range(SEEDS_PARTITIONS)}
    make = value_maker("json", run.args.record_bytes)
    ends = {p: 1 for p in per}
    produce_checked(run.stack.kafka_bootstrap, topic, {p: 1 for p in per}, make)
    say(f"seeds' shape: {SEEDS_RECORDS:,} JSON records in {SEEDS_PARTITIONS} partitions of {topic} per run")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    report = {"records": SEEDS_RECORDS, "partitions": SEEDS_PARTITIONS, "by_parallelism": {}}
    for parallelism in run.args.seeds_parallelism:
        ini = run.ini(f"seeds-p{parallelism}", [topic], "json", max(per.values()) + 1, parallelism=parallelism)
        config = load_config(ini)

        def etl_run(extra_env=None):
            return subprocess.run([ETL_CLI, "run", "--json", "--config", str(ini)], env={**env, **(extra_env or {})},
                                  capture_output=True, text=True, timeout=600)
        _batches(etl_run())  # the job's first run: tables created, what the topic holds loaded (earlier jobs' too)
        times: dict[str, dict[str, list[float]]] = {"": {"process": [], "batch": []},
                                                    "_librdkafka_defaults": {"process": [], "batch": []}}
        for rep in range(1, run.args.repeat + 1):
            for variant, extra_env in (("", None), ("_librdkafka_defaults", LIBRDKAFKA_DEFAULTS_ENV)):
                produced = produce_checked(run.stack.kafka_bootstrap, topic, per, make, start=ends)
                ranges = [(topic, p, ends[p], high) for p, (_low, high) in sorted(produced["watermarks"].items())]
                ends = {p: high for p, (_low, high) in produced["watermarks"].items()}
                label = f"seeds' shape, etl run at local[{parallelism}]{variant.replace('_', ' ')} #{rep}"
                done, stats = run.measure(label, lambda: etl_run(extra_env))
                committed = _committed(done)
                check_loaded(config, ranges, SEEDS_RECORDS)
                times[variant]["process"].append(stats["seconds"])
                times[variant]["batch"].append(committed["seconds"])
                say(f"  process {stats['seconds']:.2f}s, batch {committed['seconds']:.2f}s")
        entry = {}
        for variant, measured in times.items():
            entry[f"process_seconds{variant}"] = summarize(measured["process"])
            entry[f"batch_seconds{variant}"] = summarize(measured["batch"])
        entry["batch_records_per_second"] = SEEDS_RECORDS / statistics.median(times[""]["batch"])
        report["by_parallelism"][str(parallelism)] = entry
    run.report["seeds_shape"] = report


def _batches(done: subprocess.CompletedProcess) -> list[dict]:
    """The batches the run committed, from its JSON Lines; an error if it failed or committed none."""
    if done.returncode != 0:
        raise RuntimeError(f"etl run exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    records = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    committed = [r for r in records if r.get("event") == "committed"]
    if not committed:
        raise RuntimeError(f"expected a committed batch, got {records}")
    return committed


def _committed(done: subprocess.CompletedProcess) -> dict:
    """The one batch a timed run committed."""
    committed = _batches(done)
    if len(committed) != 1:
        raise RuntimeError(f"expected one committed batch, got {committed}")
    return committed[0]
