"""scripts/bench.py --compaction: its table (tests/perf/runner.py runs it like the others)."""
from __future__ import annotations


from tests.perf.common import MB


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
