"""scripts/bench.py --compaction: the run (as tests/perf/runner.py runs the others) and its table."""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

from tests.harness.stack import STACK_ENV_FILE, Stack, silent_services
from tests.perf.common import MB
from tests.perf.compaction_bench import compaction_bench
from tests.perf.context import BenchRun
from tests.perf.load import loadavg
from tests.perf.report import render
from tests.perf.runner import NEEDED


def run_compaction(args: argparse.Namespace, argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    stack = Stack.from_environment(STACK_ENV_FILE)
    silent = silent_services(stack, NEEDED)
    if silent:
        sys.exit(f"bench: {', '.join(silent)} does not answer ({stack}); start the local stack: scripts/local-stack up")
    bench = BenchRun(args, stack)
    bench.report["argv"] = [Path(sys.executable).name, "scripts/bench.py", *argv]
    bench.report["args"] = vars(args)
    try:
        compaction_bench(bench)
    finally:
        bench.report["loadavg_at_end"] = list(loadavg())
        bench.report["load_waited_s"] = bench.gate.waited
        bench.report["load_gate_gave_up"] = bench.gate.gave_up
        bench.cleanup()
    text = render(bench.report) + "\n\n" + render_compaction(bench.report["compaction"])
    blob = json.dumps(bench.report, indent=2, default=str)
    if args.json_out:
        Path(args.json_out).write_text(blob + "\n")
    if args.json and not args.json_out:
        print(blob)
        print(text, file=sys.stderr)
    else:
        print(text)
    return 0


def render_compaction(c: dict) -> str:
    q0, q1, k, m, r = c["query_before"], c["query_after"], c["compact"], c["merge"], c["ratios"]

    def spread(s: dict) -> str:
        return f"{s['median']:.2f}s (min {s['min']:.2f}, max {s['max']:.2f})"
    rows = [
        (f"GROUP BY before (median of {len(q0['seconds']['runs'])})", spread(q0["seconds"]),
         f"{c['files_before']} files, {c['bytes_before'] / MB:.1f} MB; warm-up {q0['warm_up_seconds']:.2f}s; "
         f"load-1m {'/'.join(f'{x:.2f}' for x in q0['loadavg_before'])}"),
        (f"GROUP BY after (median of {len(q1['seconds']['runs'])})", spread(q1["seconds"]),
         f"{c['files_after']} files, {c['bytes_after'] / MB:.1f} MB; warm-up {q1['warm_up_seconds']:.2f}s; "
         f"load-1m {'/'.join(f'{x:.2f}' for x in q1['loadavg_before'])}"),
        ("etl compact, whole process", f"{k['process_seconds']:.2f}s",
         f"once; peak RSS: Python {k['peak_rss_python_mb']:.0f} MB, JVM {k['peak_rss_jvm_mb']:.0f} MB, "
         f"process tree {k['peak_rss_tree_mb']:.0f} MB ({k['rss_samples']} samples)"),
    ]
    if "merge_seconds" in k:
        rows += [("  start -> PLANNED", f"{k['start_to_planned']:.2f}s",
                  "imports, ZooKeeper, Spark + metastore, listing, reading the footers, plan stored"),
                 ("  PLANNED -> SWITCHED (merge)", f"{k['merge_seconds']:.2f}s",
                  f"{c['files_before']} -> {c['files_after']} files written, published, ALTER TABLE"),
                 ("    PLANNED -> last file written", f"{k['merge_written_seconds']:.2f}s",
                  "by the newest merged file's mtime: the merges themselves"),
                 ("    last file -> SWITCHED", f"{k['switch_seconds']:.2f}s",
                  "WRITTEN in ZooKeeper, ALTER TABLE ... SET LOCATION, SWITCHED in ZooKeeper"),
                 ("  SWITCHED -> exit", f"{k['switched_to_exit']:.2f}s", "old files deleted, Spark stopped")]
    rows += [(f"merge_files alone (median of {len(m['merge_files']['runs'])})", spread(m["merge_files"]),
              f"the same {c['files_after']} merges on copies of the inputs; {m['output_bytes']['merge_files'] / MB:.1f}"
              f" MB written"),
             (f"pyarrow baseline (median of {len(m['pyarrow']['runs'])})", spread(m["pyarrow"]),
              f"row group by row group, snappy, INT96, no fsync; {m['output_bytes']['pyarrow'] / MB:.1f} MB written")]
    lines = [f"compaction: {c['records']:,} records, {c['kafka_partitions']} Kafka partitions, {c['batches']} batches "
             f"of <= {c['max_records_per_partition']} records per partition (loaded in {c['load_seconds']:.1f}s), "
             f"Hive partition {c['partition']}", ""]
    lines += [f"  {name:<34} {value:>30}  {note}" for name, value, note in rows]
    etl_ratio = r["etl_compact_merge_vs_pyarrow"]
    lines += ["", "targets:",
              f"  {'MET ' if r['query_speedup'] >= 3 else 'MISSED'}  GROUP BY after compaction >= 3x faster: "
              f"{r['query_speedup']:.2f}x",
              f"  {'MET ' if r['merge_files_vs_pyarrow'] >= 0.5 else 'MISSED'}  merge speed >= 0.5x plain pyarrow "
              f"(pyarrow s / merge_files s): {r['merge_files_vs_pyarrow']:.2f}x"
              + (f"; etl compact's merges (PLANNED -> last file): {etl_ratio:.2f}x" if etl_ratio else "")]
    return "\n".join(lines)
