"""One benchmark run, as scripts/bench.py's flags ask: the measurements, then the report."""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

from tests.harness.stack import STACK_ENV_FILE, Stack, silent_services
from tests.perf.cluster_shape import cluster_shape
from tests.perf.compaction_bench import compaction_bench
from tests.perf.compaction_run import render_compaction
from tests.perf.context import BenchRun
from tests.perf.crash_compare import crash_compare_bench
from tests.perf.event_time import event_time_bench
from tests.perf.fixed_cost import fixed_cost
from tests.perf.formats import formats_bench
from tests.perf.load import loadavg
from tests.perf.memory import memory_check
from tests.perf.plot import draw
from tests.perf.process_phases import process_phases
from tests.perf.profiling import profile
from tests.perf.report import render
from tests.perf.scaling import partition_scaling
from tests.perf.routes import routes_bench, routes_scaling
from tests.perf.seeds_shape import seeds_shape
from tests.perf.side_by_side import side_by_side
from tests.perf.rollups import rollups_bench
from tests.perf.skipping import skipping_bench
from tests.perf.throughput import throughput

# The benchmark needs these; the Thrift Server (the analysts' endpoint) it does not use.
NEEDED = {"ZooKeeper": True, "Kafka": True, "metastore": True}


def run(args: argparse.Namespace, argv: list[str]) -> int:
    """Measure what `args` asks for, print the report (and the JSON), clean up, draw the charts
    with --plot; returns 0."""
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    stack = Stack.from_environment(STACK_ENV_FILE)
    silent = silent_services(stack, NEEDED)
    if silent:
        sys.exit(f"bench: {', '.join(silent)} does not answer ({stack}); start the local stack: "
                 f"scripts/local-stack up")
    bench = BenchRun(args, stack)
    bench.report["argv"] = [Path(sys.executable).name, "scripts/bench.py", *argv]
    bench.report["args"] = vars(args)
    try:
        measure(bench)
    finally:
        bench.report["loadavg_at_end"] = list(loadavg())
        bench.report["load_waited_s"] = bench.gate.waited
        bench.report["load_gate_gave_up"] = bench.gate.gave_up
        bench.cleanup()
    show(bench.report, args)
    if args.plot:
        draw([bench.report], Path(args.plot))
    return 0


def measure(bench: BenchRun) -> None:
    args = bench.args
    if args.compaction:
        compaction_bench(bench)
        return
    if args.side_by_side:
        side_by_side(bench)
        return
    if args.skipping:
        skipping_bench(bench)
        return
    if args.rollups:
        rollups_bench(bench)
        return
    if args.crash_compare:
        crash_compare_bench(bench)
        return
    if args.fixed_cost:
        process_phases(bench)
        return
    if args.cluster_shape:
        cluster_shape(bench)
        return
    if args.partition_scaling:
        partition_scaling(bench)
    if args.memory_check:
        memory_check(bench)
    if args.event_time:
        event_time_bench(bench)
    if args.formats:
        formats_bench(bench)
    if args.seeds_shape:
        seeds_shape(bench)
    if args.routes:
        routes_bench(bench)
    if args.scaling_topics:
        routes_scaling(bench)
    if not (args.memory_check or args.partition_scaling or args.event_time or args.formats or args.seeds_shape
            or args.routes or args.scaling_topics):
        throughput(bench)
        if not args.no_fixed_cost:
            fixed_cost(bench)
    if args.profile:
        profile(bench)


def show(report: dict, args: argparse.Namespace) -> None:
    """The text report on stdout; with --json the JSON object on stdout (text to stderr), with
    --json-out the JSON in the file (text on stdout)."""
    text = render(report) + (f"\n\n{render_compaction(report['compaction'])}" if "compaction" in report else "")
    text += f"\n\n{report['crash_compare']['table']}" if "crash_compare" in report else ""
    text += f"\n\n{report['cluster_shape']['table']}" if "cluster_shape" in report else ""
    text += f"\n\n{report['skipping']['table']}" if "skipping" in report else ""
    if args.json or args.json_out:
        blob = json.dumps(report, indent=2, default=str)
        if args.json_out:
            Path(args.json_out).write_text(blob + "\n")
            print(text)
        else:
            print(blob)
            print(text, file=sys.stderr)
    else:
        print(text)
