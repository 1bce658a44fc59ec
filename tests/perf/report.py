"""The benchmark's report as text: figures, ratios and whether each target was met."""
from __future__ import annotations

import statistics

from tests.perf.common import MB
from tests.perf.flink_peer import HEAP


def _spread(s: dict, unit: str = "s", digits: int = 2) -> str:
    return f"{s['median']:.{digits}f}{unit} (min {s['min']:.{digits}f}, max {s['max']:.{digits}f})"


def render(report: dict) -> str:
    lines = []
    host = report["host"]
    lines.append(f"bench {report['run_id']}: {host['cpus']} CPUs, Python {host['python']}, Spark {host['pyspark']}, "
                 f"pyarrow {host['pyarrow']}, librdkafka {host['librdkafka']}")
    lines.append(f"command: {' '.join(report['argv'])}")
    lines.append(f"load average at start: {host['loadavg_at_start']}; at end: {report.get('loadavg_at_end')}; "
                 f"waited {report.get('load_waited_s', 0):.0f}s for a quiet machine"
                 + ("; GAVE UP waiting (measured under load)" if report.get("load_gate_gave_up") else ""))
    targets = []
    if "throughput" in report:
        d, t = report["data"], report["throughput"]
        lines.append("")
        lines.append(f"data: {d['records']:,} {d['decoder']} records, {d['value_bytes'] / MB:.1f} MB of values "
                     f"(~{d['value_bytes'] / d['records']:.0f} B each), {d['partitions']} partitions; "
                     f"produced in {d['produce_seconds']:.1f}s")
        lines.append(f"Spark local[{report['args']['parallelism']}], one task per partition, "
                     f"{report['args']['repeat']} repetitions, medians (min, max):")
        lines.append(f"  {'path':<34} {'time':>28} {'records/s':>12} {'MB/s':>8}  per run: load-1m before | CPU cores "
                     f"used by the benchmark, the local stack, other processes")
        names = {"drain": "(a) drain (consume + count)", "drain_librdkafka_defaults": "    drain, librdkafka defaults",
                 "drain_read_range": "    drain via etl read_range", "full_batch": "(b) full etl batch (plan..commit)",
                 "full_batch_librdkafka_defaults": "    full batch, librdkafka defaults",
                 "row_by_row": "(c) row-by-row DataFrame"}
        for key, label in names.items():
            if key not in t:  # a report saved before this path was measured
                continue
            e = t[key]
            loads = "/".join(f"{x:.2f}" for x in e["loadavg_before"])
            cpu = " ".join(f"{a:.2f},{b:.2f},{c:.2f}" for a, b, c in
                           zip(e["own_cpu_cores"], e["stack_cpu_cores"], e["foreign_cpu_cores"]))
            lines.append(f"  {label:<34} {_spread(e['seconds']):>28} {e['records_per_s']:>12,.0f} {e['mb_per_s']:>8.1f}"
                         f"  {loads} | {cpu}")
        fb = t["full_batch"]
        run_total = fb["phases_median"]["run_minus_tables"]
        lines.append(f"  {'    whole run_job but CREATE TABLE':<34} {run_total:>27.2f}s "
                     f"{fb['run_total_rate']['records_per_s']:>12,.0f} {fb['run_total_rate']['mb_per_s']:>8.1f}")
        lines.append("  full batch phases (median s): " + ", ".join(
            f"{k} {v:.3f}" for k, v in fb["phases_median"].items()
            if k not in ("batch", "run_total", "run_minus_tables")))
        lines.append(f"  job said: {fb['job_said']}")
        lines.append(f"  peak Python worker RSS during (b): {_spread(fb['peak_worker_rss_mb'], ' MB', 0)}; "
                     f"daemon + workers: {_spread(fb['peak_workers_total_rss_mb'], ' MB', 0)}")
        r = t["ratios"]
        lines.append(f"  ratios: full batch / drain = {r['full_batch_vs_drain']:.2f}x (target >= 0.8x); "
                     f"full batch / row-by-row = {r['full_batch_vs_row_by_row']:.2f}x (target >= 3x); "
                     f"read_range / drain = {r['drain_read_range_vs_drain']:.2f}x; "
                     f"whole run_job / drain = {r['full_run_total_vs_drain']:.2f}x")
        best = t["best_drain"]
        lines.append("  drain by parallelism and fetch size (median s): " + ", ".join(
            f"local[{e['parallelism']}] {e['max_partition_fetch_bytes'] / 2**20:g} MiB {e['seconds']['median']:.2f}"
            for e in best["by_settings"])
            + f"; best local[{best['parallelism']}] with {best['max_partition_fetch_bytes'] / 2**20:g} MiB fetches, "
              f"{best['records_per_s']:,.0f} records/s")
        lines.append(f"  full batch / best drain = {r['full_batch_vs_best_drain']:.2f}x (target >= 0.9x)")
        if "full_batch_vs_librdkafka_defaults" in r:
            lines.append(f"  the ETL's consumer tuning (fetch.queue.backoff.ms): full batch "
                         f"{r['full_batch_vs_librdkafka_defaults']:.2f}x, "
                         f"drain {r['drain_vs_librdkafka_defaults']:.2f}x faster than with librdkafka's defaults")
            targets.append(("full batch >= 1.3x the same batch with librdkafka's defaults",
                            r["full_batch_vs_librdkafka_defaults"] >= 1.3,
                            f"{r['full_batch_vs_librdkafka_defaults']:.2f}x"))
        targets.append(("full batch >= 390K records/s (on the 2-core machine of docs/performance.md)",
                        t["full_batch"]["records_per_s"] >= 390_000, f"{t['full_batch']['records_per_s']:,.0f}/s"))
        targets.append(("full batch >= 0.8x drain", r["full_batch_vs_drain"] >= 0.8,
                        f"{r['full_batch_vs_drain']:.2f}x"))
        targets.append(("full batch >= 0.9x best drain", r["full_batch_vs_best_drain"] >= 0.9,
                        f"{r['full_batch_vs_best_drain']:.2f}x"))
        targets.append(("full batch >= 3x row-by-row", r["full_batch_vs_row_by_row"] >= 3,
                        f"{r['full_batch_vs_row_by_row']:.2f}x"))
    if "fixed_cost" in report:
        f = report["fixed_cost"]
        s = f["spark_startup"]
        lines.append("")
        lines.append("fixed cost, nothing new to load:")
        lines.append(f"  `etl run` (fresh process, no Spark): {_spread(f['no_data_run_seconds'])} over 5 runs; "
                     f"load before {'/'.join(f'{x:.2f}' for x in f['no_data_run_loadavg_before'])}")
        lines.append(f"    of which interpreter + imports of etl: {_spread(f['python_imports_seconds'])}")
        lines.append(f"    it said: {f['no_data_run_said']}")
        lines.append(f"  for reference, Spark start-up in a fresh process: session {_spread(s['session_seconds'])}, "
                     f"first metastore call {_spread(s['first_metastore_call_seconds'])}, first Python task "
                     f"{_spread(s['first_python_task_seconds'])}, whole process {_spread(s['process_seconds'])}")
        targets.append(("no-data run <= 2 s (Spark not started)", f["no_data_run_seconds"]["median"] <= 2.0,
                        f"{f['no_data_run_seconds']['median']:.2f}s"))
    if "seeds_shape" in report:
        lines += _seeds_shape(report["seeds_shape"], targets)
    if "memory" in report:
        lines.append("")
        lines.append("memory: one partition-batch per run (row_group_size "
                     f"{report['memory'][0]['row_group_size']}), Python worker RSS sampled every 50 ms:")
        for m in report["memory"]:
            lines.append(f"  {m['records']:>11,} records ({m['value_bytes'] / MB:,.0f} MB): peak worker RSS "
                         f"{m['peak_worker_rss_mb']:.0f} MB (before the run {m['worker_rss_before_mb']:.0f} MB; "
                         f"daemon + workers {m['peak_workers_total_rss_mb']:.0f} MB, {m['rss_samples']} samples); "
                         f"batch {m['phases']['batch']:.1f}s = {m['batch_rate']['records_per_s']:,.0f} records/s; "
                         f"load before {m['loadavg_before'][0]:.2f}, foreign CPU {m['foreign_cpu_cores']:.2f} cores")
        if len(report["memory"]) >= 2:
            small, big = report["memory"][0], report["memory"][-1]
            growth = big["peak_worker_rss_mb"] / small["peak_worker_rss_mb"] if small["peak_worker_rss_mb"] \
                else float("nan")
            lines.append(f"  {big['records'] // small['records']}x the records -> {growth:.2f}x the peak worker RSS")
            targets.append((f"flat memory {small['records']:,} vs {big['records']:,}", growth <= 1.25,
                            f"{growth:.2f}x"))
    if "partition_scaling" in report:
        lines.append("")
        lines.append("partitions: plan (Kafka metadata, watermarks, ZooKeeper reads, write_plan: the Job's plan "
                     "phase) and commit (one ZooKeeper transaction), seconds; ZooKeeper-only rows split the plan:")
        lines.append(f"  {'partitions':>10} {'batch':>6} {'plan':>7} {'zk rd':>6} {'wr plan':>7} "
                     f"{'commit':>7} {'tasks':>7} {'run':>7}  znodes (header B, chunks x B), commit request ~B")
        ok_all = True
        for entry in report["partition_scaling"]:
            n = entry["partitions"]
            if entry["mode"] == "zookeeper-only":
                for b in entry["batches"]:
                    tm, z = b["timings"], b["znodes"]
                    lines.append(f"  {n:>10} {b['batch']:>6} {'-':>7} {tm['zk_reads']:>6.3f} "
                                 f"{tm['write_plan']:>7.3f} {tm['commit']:>7.3f} {'-':>7} {'-':>7}  "
                                 f"{z['header_bytes']}, "
                                 f"{z['range_chunks']} x <= {max(z['range_chunk_bytes'], default=0)}, "
                                 f"~{z['commit_request_bytes_estimate']:,}  offsets match: {b['offsets_match']} "
                                 f"(ZooKeeper only; WRITTEN {tm.get('written', 0):.3f}, REGISTERED with the "
                                 f"snapshot {tm.get('registered', 0):.3f}, all {tm.get('total', 0):.3f})")
                    ok_all &= b["offsets_match"]
                continue
            rows = [(str(b["batch"]), b["phases"], b["znodes"], b["loaded"]) for b in entry["batches"]]
            rows.append(("no-data", entry["no_data"]["phases"], None, None))
            for batch, ph, z, loaded in rows:
                zs = (f"{z['header_bytes']}, {z['range_chunks']} x {z['range_chunk_bytes']}, "
                      f"~{z['commit_request_bytes_estimate']:,}") if z else ""
                lines.append(f"  {n:>10} {batch:>6} {ph['plan']:>7.3f} {'-':>6} {'-':>7} "
                             f"{ph['commit']:>7.3f} {ph['tasks']:>7.2f} {ph['run_total']:>7.2f}  {zs}"
                             + (f"  committed {loaded['ranges']} offsets = watermarks, {loaded['rows']} rows"
                                if loaded else ""))
        biggest = report["partition_scaling"][-1]
        if biggest["mode"] == "full job":
            worst = max(max(b["phases"]["plan"], b["phases"]["commit"]) for b in biggest["batches"])
            targets.append((f"{biggest['partitions']} partitions fine (plan and commit each < 5 s, offsets verified)",
                            worst < 5.0 and ok_all, f"worst plan/commit {worst:.2f}s"))
        else:
            targets.append((f"{biggest['partitions']} partitions (ZooKeeper only)", ok_all, "offsets verified"))
    if "event_time" in report:
        e = report["event_time"]
        t, m = e["throughput"], e["memory"]
        lines.append("")
        lines.append(f"event time ([hive] partition_by = column:ts, ts over 3 hours), {t['records']:,} records, "
                     f"full batch median: planning_time {t['seconds']['planning_time']['median']:.2f}s, "
                     f"column {t['seconds']['column']['median']:.2f}s")
        lines.append(f"  one range of {(m.get(1) or m.get('1'))['records']:,} records: peak worker RSS "
                     f"{_mem(m, 1):.0f} MB over 1 hourly partition, {_mem(m, 720):.0f} MB over 720")
        targets.append(("column: batch >= 0.9x planning_time", t["column_speed_vs_planning_time"] >= 0.9,
                        f"{t['column_speed_vs_planning_time']:.2f}x"))
        targets.append(("RSS over 720 partitions <= 1.5x over 1", m["rss_ratio_720_vs_1"] <= 1.5,
                        f"{m['rss_ratio_720_vs_1']:.2f}x"))
    if "formats" in report:
        f = report["formats"]
        lines.append("")
        lines.append(f"formats, {f['records']:,} records of the same logical content, full batch median (records/s):")
        for name, seconds in f["seconds"].items():
            lines.append(f"  {name:<16} {seconds['median']:6.2f}s  {f['rates'][name]:>10,.0f}")
        r = f["ratios"]
        targets.append(("avro batch >= 0.7x json", r["avro_vs_json"] >= 0.7, f"{r['avro_vs_json']:.2f}x"))
        targets.append(("protobuf batch >= 0.6x json", r["protobuf_vs_json"] >= 0.6, f"{r['protobuf_vs_json']:.2f}x"))
        targets.append(("avro and protobuf >= 3x avro row by row",
                        min(r["avro_vs_avro_row_by_row"], r["protobuf_vs_avro_row_by_row"]) >= 3,
                        f"avro {r['avro_vs_avro_row_by_row']:.2f}x, protobuf {r['protobuf_vs_avro_row_by_row']:.2f}x"))
    if "profile" in report:
        p = report["profile"]
        n = p["range"][3] - p["range"][2]
        lines.append("")
        lines.append(f"profile of one range ({n:,} records) in the benchmark process:")
        for key in ("consume_only", "read_range", "read_range+decode", "run_range_task"):
            if key in p:
                lines.append(f"  {key:<20} {p[key]:6.2f}s  {n / p[key]:>10,.0f} records/s")
        lines.append(p["cprofile_top_tottime"])
    if "py_spy" in report:
        p = report["py_spy"]
        lines.append("")
        lines.append(f"py-spy, Spark Python workers during one more full batch ({p['task_samples']} samples inside "
                     f"run_range_task, 250/s; tasks phase {p['phases']['tasks']:.2f}s):")
        lines.append("  inclusive (share of the task's samples):")
        for name, count, share in p["inclusive_top"][:20]:
            lines.append(f"    {share:5.1f}%  {name}")
        lines.append("  self:")
        for name, count, share in p["self_top"][:15]:
            lines.append(f"    {share:5.1f}%  {name}")
    if "side_by_side" in report:
        lines += _side_by_side(report["side_by_side"], targets)
    if targets:
        lines.append("")
        lines.append("targets:")
        for name, ok, value in targets:
            lines.append(f"  {'MET ' if ok else 'MISSED'}  {name}: {value}")
    return "\n".join(lines)


def _mem(memory: dict, hours: int) -> float:
    entry = memory.get(hours) or memory.get(str(hours))  # JSON turns the keys into strings
    return entry["peak_worker_rss_mb"]


def _seeds_shape(seeds: dict, targets: list) -> list[str]:
    lines = ["", f"the seeds' batch shape: {seeds['records']:,} JSON records in {seeds['partitions']} partitions, "
                 f"a whole `etl run` process per run (Spark start-up included):"]
    for parallelism, e in seeds["by_parallelism"].items():
        lines.append(f"  local[{parallelism}]: process {_spread(e['process_seconds'])}, "
                     f"batch {_spread(e['batch_seconds'])} ({e['batch_records_per_second']:,.0f} records/s)")
        if "process_seconds_librdkafka_defaults" in e:
            lines.append(f"    with librdkafka's consumer defaults: process "
                         f"{_spread(e['process_seconds_librdkafka_defaults'])}, batch "
                         f"{_spread(e['batch_seconds_librdkafka_defaults'])}")
    best = min(seeds["by_parallelism"].values(), key=lambda e: e["batch_seconds"]["median"])
    targets.append(("seeds' shape: batch <= 2.5 s", best["batch_seconds"]["median"] <= 2.5,
                    f"{best['batch_seconds']['median']:.2f}s"))
    targets.append(("seeds' shape: whole process <= 15 s", best["process_seconds"]["median"] <= 15,
                    f"{best['process_seconds']['median']:.2f}s"))
    return lines


def _side_by_side(sbs: dict, targets: list) -> list[str]:
    """The side-by-side table with Spark's own Kafka source and file sink, its ratios, and the
    seeds' shape as whole processes (tests/perf/side_by_side.py)."""
    d, rows = sbs["data"], sbs["rows"]
    p = d["parallelism"]
    lines = ["", f"side by side (in-process, {sbs['in_process']}): {d['records']:,} JSON records, "
                 f"{d['value_bytes'] / MB:.1f} MB of values (~{d['value_bytes'] / d['records']:.0f} B each), "
                 f"{d['partitions']} partitions, local[{p}], medians of {len(rows['ours']['runs'])}:",
             f"  {'job':<33} {'seconds':>26} {'records/s':>10} {'work r/s':>10} {'r/s/core':>9} {'MB/s/core':>9} "
             f"{'CPU-s/M':>8} {'r/CPU-s':>8} {'files':>6} {'MB':>7} {'RSS MB':>7} {'workers':>7}  load before"]
    names = {"ours": "ours: full batch (run_job)", "ours_orc": "ours, [hive] format = orc",
             "peer_json": "peer: Kafka source, from_json",
             "peer_json_ts_format": "peer: from_json, timestampFormat", "peer_string": "peer: value as a string",
             "flink": "Flink: KafkaSource, FileSink (JVM)"}
    for key, label in names.items():
        if key not in rows:
            continue
        e = rows[key]
        lines.append(f"  {label:<33} {_spread(e['seconds']):>26} {e['records_per_s']:>10,.0f} "
                     f"{e['work_records_per_s']:>10,.0f} "
                     f"{e['records_per_s_per_core']:>9,.0f} {e['mb_per_s_per_core']:>9.1f} "
                     f"{e['cpu_s_per_million']['median']:>8.2f} {e['records_per_cpu_s']:>8,.0f} "
                     f"{e['files']['median']:>6.0f} {e['bytes']['median'] / MB:>7.1f} "
                     f"{e['peak_tree_rss_mb']['median']:>7.0f} "
                     f"{e['peak_workers_total_rss_mb']['median']:>7.0f}  "
                     + "/".join(f"{x:.2f}" for x in e["loadavg_before"]))
    lines.append("  (seconds: the whole in-process run, table creation and Hive registration included; work r/s: "
                 "ours its batch plan..commit, the peer its query; RSS: the bench's whole process tree, driver JVM "
                 "included, whose heap keeps its high-water mark across runs; workers: the Python workers)")
    if "flink" in rows:
        e = rows["flink"]
        start_up = statistics.median(m["start_up_seconds"] for m in e["runs"])
        lines.append(f"  (Flink: a process of its own, -Xmx{HEAP}; its seconds include its JVM and MiniCluster "
                     f"start-up, median {start_up:.2f}s to its first record; work r/s: its first record to its end, "
                     f"final checkpoint and commit included; RSS: its JVM alone)")
    elif sbs.get("flink_skipped"):
        lines.append(f"  (Flink skipped: {sbs['flink_skipped']})")
    for peer, r in sbs["ratios"].items():
        lines.append(f"  ours / {peer}: records/s {r['records_per_s']:.2f}x (work {r['work_records_per_s']:.2f}x); "
                     f"the peer's CPU-s per M {r['peer_cpu_s_per_million']:.2f}x ours, bytes {r['peer_bytes']:.2f}x, "
                     f"files {r['peer_files']:.2f}x, peak tree RSS {r['peer_peak_tree_rss']:.2f}x")
    ratio = sbs["ratios"]["peer_json"]["records_per_s"]
    targets.append(("side by side: ours >= 1.5x the peer's records/s", ratio >= 1.5, f"{ratio:.2f}x"))
    seeds = sbs.get("seeds_shape")
    if seeds:
        lines.append(f"  the seeds' shape, {seeds['records']:,} records in {seeds['partitions']} partitions, one "
                     f"scheduled run as a whole process at local[{seeds['parallelism']}]:")
        for who, label in (("ours", "etl run"), ("peer_json", "peer_job")):
            e = seeds[who]
            lines.append(f"    {label:<9} process {_spread(e['process_seconds'])}, "
                         f"batch {_spread(e['batch_seconds'])}, "
                         f"CPU {_spread(e['cpu_seconds'])}, peak RSS {_spread(e['peak_rss_mb'], ' MB', 0)}")
        r = seeds["ratios"]
        lines.append(f"    peer / ours: process {r['process_seconds']:.2f}x, batch {r['batch_seconds']:.2f}x, "
                     f"CPU {r['cpu_seconds']:.2f}x, peak RSS {r['peak_rss_mb']:.2f}x; the peer wrote "
                     f"{seeds['peer_output']['files']} files")
    return lines
