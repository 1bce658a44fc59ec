"""Side by side with what a PySpark user writes instead (issue 27): Spark's own Kafka source and
file sink (tests/perf/peer_job.py), on the same records, on the same machine, in one run.

In-process, in the bench's one Spark session at local[P] (the session has the connector on
spark.jars, through the job's [spark] passthrough), repeated and interleaved: per repetition our
full batch (run_job on a fresh ZooKeeper root and table), the peer parsing the JSON with
from_json (as users first write it, and with from_json's timestampFormat set for the events'
ts), and the peer keeping the JSON as one string column (the cost of parsing shows), each
into a fresh table (the peer: a fresh output folder, checkpoint and external table, repaired
with MSCK REPAIR TABLE). In-process, neither pays Spark's start-up, so records/s compares the
work itself; the seeds' shape compares whole processes.

The seeds' shape: 545,884 records in 18 partitions per run, a whole scheduled run as a process
(`etl run` and `python -m tests.perf.peer_job`), both jobs having run once before (ZooKeeper
state, tables, the peer's checkpoint exist); each repetition produces the records once and runs
both on them, in alternating order.

What each measurement records: its wall time, the CPU seconds of this benchmark's process tree
(driver JVM, Python workers, and a job's own process tree), the peak RSS of that tree, the
Parquet files and bytes written (files ending .parquet under the table's folder, none in a
folder or file whose name starts with "_" or ".": neither the peer's _spark_metadata log nor
the .crc files Hadoop's local file system writes beside each file), and a check that the folder
holds exactly the records produced: as many rows as records, as many distinct (partition,
offset), each partition's offsets from its first to its last.

Apache Flink, the second peer (tests/perf/flink_peer.py), runs as what it is, a process of its own
(a local MiniCluster in one JVM, -Xmx768m), bounded at the latest offsets so that it ends, into a
fresh folder and checkpoint folder per repetition, then its external table and MSCK REPAIR TABLE
in the bench's session, as the Spark peer's row. Its seconds therefore include its JVM's and
MiniCluster's start-up, which the in-process rows do not pay; its "work" is the time from its
first record (the job's own line) to its end, final checkpoint and file commit included. Its RSS
is its JVM's alone. Without its jars (scripts/setup --bench), the row is skipped and says why.
"""
from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from tests.harness.paths import ETL as ETL_CLI, REPO
from tests.perf import flink_peer
from tests.perf.common import MB, say, spread, summarize
from tests.perf.context import BenchRun
from tests.perf.data import produce_checked, value_maker
from tests.perf.peer_job import connector_jars, register_table, run_query
from tests.perf.phases import check_loaded, run_job_timed
from tests.perf.seeds_shape import SEEDS_PARTITIONS, SEEDS_RECORDS, _batches, _committed

ROWS = ("ours", "ours_orc", "peer_json", "peer_json_ts_format", "peer_string")
PEERS = ROWS[2:]
# The events' ts as value_maker writes it ("2026-11-21 10:00:00"): from_json's timestampFormat
# for it, which a user who reads from_json's options may set (the peer_json_ts_format row).
TS_FORMAT = "yyyy-MM-dd HH:mm:ss"


def side_by_side(run: BenchRun) -> None:
    args = run.args
    run.session_spark = {"spark.jars": connector_jars()}
    run.start_spark()
    topic = run.new_topic(args.partitions, "sbs")
    per = spread(args.records, args.partitions)
    say(f"producing {args.records:,} JSON records of ~{args.record_bytes} bytes into {topic} "
        f"({args.partitions} partitions)")
    produced = produce_checked(run.stack.kafka_bootstrap, topic, dict(enumerate(per)),
                               value_maker("json", args.record_bytes))
    ranges = [(topic, p, low, high) for p, (low, high) in sorted(produced["watermarks"].items())]
    records, nbytes = produced["records"], produced["bytes"]
    flink_skipped = flink_peer.unavailable()
    if flink_skipped:
        say(f"the Flink peer is skipped: {flink_skipped}")
    else:
        flink_peer.compile_job()
    report: dict = {"data": {"topic": topic, "records": records, "value_bytes": nbytes, "partitions": args.partitions,
                             "record_bytes": args.record_bytes, "parallelism": args.parallelism},
                    "in_process": "the bench's one Spark session, local[P]: neither job pays Spark's start-up",
                    "flink_skipped": flink_skipped}
    runs: dict[str, list[dict]] = {name: [] for name in ROWS + (() if flink_skipped else ("flink",))}
    for rep in range(1, args.repeat + 1):
        runs["ours"].append(ours_in_process(run, f"sbs-ours-{rep}", topic, ranges, records, max(per) + 1))
        runs["ours_orc"].append(ours_in_process(run, f"sbs-ours-orc-{rep}", topic, ranges, records, max(per) + 1,
                                                {"format": "orc"}))
        for peer in PEERS:
            runs[peer].append(peer_in_process(run, f"sbs_{peer}_{rep}", topic, peer, ranges, records))
        if not flink_skipped:
            runs["flink"].append(flink_process(run, f"sbs_flink_{rep}", topic, ranges, records))
    report["rows"] = {name: summary(measured, records, nbytes, args.parallelism) for name, measured in runs.items()}
    report["ratios"] = ratios(report["rows"])
    report["seeds_shape"] = seeds_side_by_side(run)
    run.report["side_by_side"] = report


def ours_in_process(run: BenchRun, label: str, topic: str, ranges: list, records: int, max_records: int,
                    hive: dict | None = None) -> dict:
    """Our full batch: run_job on a fresh table, as throughput.full_batch runs it (`hive`: keys of
    [hive], the ORC row's format)."""
    from etl.config import load_config
    from etl.model.naming import table_location
    config = load_config(run.ini(label, [topic], "json", max_records, hive=hive))
    (phases, said), stats = run.measure(f"ours {label}", lambda: run_job_timed(config), workers=True, tree=True)
    check_loaded(config, ranges, records)
    folder = Path(table_location(str(run.work / "warehouse"), config.hive.database, config.hive.table))
    written = check_written(folder, ranges, records)
    say(f"  batch {phases['batch']:.2f}s; {written['files']} files, {written['bytes'] / MB:.1f} MB; "
        f"peak tree RSS {stats['peak_tree_rss_mb']:.0f} MB")
    return {**stats, "work_seconds": phases["batch"], "phases": phases, "job_said": said, **written}


def peer_in_process(run: BenchRun, label: str, topic: str, peer: str, ranges: list, records: int) -> dict:
    """The peer in the bench's session: its query into a fresh folder and checkpoint, then its
    external table and MSCK REPAIR TABLE."""
    parse = "string" if peer == "peer_string" else "json"
    ts_format = TS_FORMAT if peer == "peer_json_ts_format" else None
    folder, checkpoint = run.work / label / "out", run.work / label / "checkpoint"
    name = f"b{run.run_id[-6:]}_{label}"
    run.tables.append(name)

    def go() -> dict:
        done = run_query(run.spark, run.stack.kafka_bootstrap, topic, folder.as_uri(), checkpoint.as_uri(), parse,
                         ts_format)
        done["register_seconds"] = register_table(run.spark, f"{run.database}.{name}", folder.as_uri(), parse)
        return done
    done, stats = run.measure(f"peer {label}", go, workers=True, tree=True)
    if done["records"] != records:
        raise RuntimeError(f"the peer {label} read {done['records']} records, expected {records}")
    written = check_written(folder, ranges, records)
    say(f"  query {done['seconds']:.2f}s, table + MSCK REPAIR {done['register_seconds']:.2f}s; "
        f"{written['files']} files, {written['bytes'] / MB:.1f} MB; peak tree RSS {stats['peak_tree_rss_mb']:.0f} MB")
    return {**stats, "work_seconds": done["seconds"], "register_seconds": done["register_seconds"],
            "batches": done["batches"], "duration_ms": done["duration_ms"], **written}


def flink_process(run: BenchRun, label: str, topic: str, ranges: list, records: int) -> dict:
    """Flink's job as a process, bounded, into a fresh folder and checkpoint folder; then its
    external table and MSCK REPAIR TABLE in the bench's session (measured, as the Spark peer's
    are); then, not measured, a count and the ts range read back through that Hive table."""
    folder, checkpoints = run.work / label / "out", run.work / label / "checkpoints"
    name = f"b{run.run_id[-6:]}_{label}"
    table = f"{run.database}.{name}"
    run.tables.append(name)
    cmd = flink_peer.job_command(run.stack.kafka_bootstrap, topic, folder, checkpoints, bounded=True,
                                 parallelism=run.args.parallelism)

    def go() -> tuple[subprocess.CompletedProcess, float, float, float]:
        before, started = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900)
        after, seconds = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic() - started
        if done.returncode != 0:
            raise RuntimeError(f"the Flink job exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
        register = register_table(run.spark, table, folder.as_uri())
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        return done, seconds, cpu, register
    (done, seconds, cpu, register), stats = run.measure(f"flink {label}", go, tree=True)
    end = flink_peer.event(done.stdout, "finished")
    if not end or not end["first_record_ms"]:
        raise RuntimeError(f"the Flink job said no finished line or no first record:\n{done.stdout[-2000:]}")
    written = check_written(folder, ranges, records)
    hidden = flink_peer.hidden_files(folder)
    hive_rows, ts_min, ts_max = run.spark.sql(f"SELECT count(*), min(ts), max(ts) FROM {table}").first()
    if hive_rows != records:
        raise RuntimeError(f"Hive reads {hive_rows} rows of the Flink job's table {table}, expected {records}")
    work = (end["end_ms"] - end["first_record_ms"]) / 1000
    start_up = (end["first_record_ms"] - end["jvm_start_ms"]) / 1000
    tail = (end["end_ms"] - end["last_record_ms"]) / 1000
    say(f"  process {seconds:.2f}s (JVM start to first record {start_up:.2f}s, first record to end {work:.2f}s, of "
        f"which last record to end {tail:.2f}s; process CPU {cpu:.1f}s), table + MSCK REPAIR {register:.2f}s; "
        f"{written['files']} files, {written['bytes'] / MB:.1f} MB, hidden {hidden}; "
        f"peak RSS {stats['peak_new_processes_rss_mb']:.0f} MB; Hive reads {hive_rows:,} rows, ts {ts_min}..{ts_max}")
    return {**stats, "work_seconds": work, "process_seconds": seconds, "start_up_seconds": start_up,
            "last_record_to_end_seconds": tail, "process_cpu_seconds": cpu, "register_seconds": register,
            "job_said": end, "hidden_files": hidden, "bench_peak_tree_rss_mb": stats["peak_tree_rss_mb"],
            "peak_tree_rss_mb": stats["peak_new_processes_rss_mb"], "peak_workers_total_rss_mb": 0.0,
            "hive": {"rows": hive_rows, "ts_min": str(ts_min), "ts_max": str(ts_max)}, **written}


def data_files(folder: Path, suffix: str = ".parquet") -> list[Path]:
    """The data files a reader of the folder sees: *.parquet (or `suffix`), nothing under _ or . names."""
    return sorted(path for path in folder.rglob(f"*{suffix}")
                  if not any(part.startswith(("_", ".")) for part in path.relative_to(folder).parts))


def check_written(folder: Path, ranges: list, records: int, start: dict[int, int] | None = None) -> dict:
    """Files and bytes under `folder`, and that they hold exactly the produced records: one row
    per record, one per (partition, offset), each partition's offsets from its first produced
    (or `start[p]`) to its last."""
    import duckdb
    import pyarrow.dataset as ds
    files = data_files(folder) or data_files(folder, ".orc")
    with duckdb.connect() as db:  # ORC through pyarrow's reader (DuckDB reads no ORC), the query in DuckDB
        db.register("written", ds.dataset([str(p) for p in files], format=files[0].suffix.lstrip(".") if files
                                          else "parquet").to_table(columns=["kafka_partition", "kafka_offset"]))
        rows, distinct = db.sql("SELECT count(*), count(DISTINCT (kafka_partition, kafka_offset)) "
                                "FROM written").fetchall()[0]
        spans = {p: (low, high) for p, low, high in db.sql(
            "SELECT kafka_partition, min(kafka_offset), max(kafka_offset) + 1 FROM written GROUP BY 1").fetchall()}
    expected = {p: ((start or {}).get(p, low), high) for _t, p, low, high in ranges}
    if rows != records or distinct != records or spans != expected:
        raise RuntimeError(f"{folder}: {rows} rows, {distinct} distinct (partition, offset), offsets {spans}; "
                           f"expected {records} records, offsets {expected}")
    return {"files": len(files), "bytes": sum(path.stat().st_size for path in files), "rows": rows,
            "distinct": distinct}


def summary(measured: list[dict], records: int, nbytes: int, parallelism: int) -> dict:
    """Medians of one row: records/s (the whole measurement, and its work alone), CPU seconds
    per million records, per core of local[P], files, bytes, peak RSS."""
    seconds = summarize([m["seconds"] for m in measured])
    cpu = summarize([m["own_cpu_cores"] * m["seconds"] / records * 1e6 for m in measured])
    per_s = records / seconds["median"]
    return {"seconds": seconds, "work_seconds": summarize([m["work_seconds"] for m in measured]),
            "records_per_s": per_s, "mb_per_s": nbytes / MB / seconds["median"],
            "work_records_per_s": records / statistics.median(m["work_seconds"] for m in measured),
            "records_per_s_per_core": per_s / parallelism,
            "mb_per_s_per_core": nbytes / MB / seconds["median"] / parallelism,
            "cpu_s_per_million": cpu, "records_per_cpu_s": 1e6 / cpu["median"],
            "mb_per_cpu_s": nbytes / MB / (cpu["median"] * records / 1e6),
            "files": summarize([m["files"] for m in measured]), "bytes": summarize([m["bytes"] for m in measured]),
            "peak_tree_rss_mb": summarize([m["peak_tree_rss_mb"] for m in measured]),
            "peak_workers_total_rss_mb": summarize([m["peak_workers_total_rss_mb"] for m in measured]),
            "loadavg_before": [m["loadavg_before"][0] for m in measured],
            "own_cpu_cores": [m["own_cpu_cores"] for m in measured],
            "stack_cpu_cores": [m["stack_cpu_cores"] for m in measured],
            "foreign_cpu_cores": [m["foreign_cpu_cores"] for m in measured],
            "quiet_before": [m["quiet_before"] for m in measured], "runs": measured}


def ratios(rows: dict) -> dict:
    """Ours over each peer row: records/s (> 1: ours faster), and the peer's CPU, bytes, files
    and memory over ours (> 1: the peer uses more)."""
    ours = rows["ours"]
    out = {}
    for peer in (name for name in rows if name != "ours"):  # ours_orc too: ORC's cost over Parquet's
        p = rows[peer]
        out[peer] = {"records_per_s": ours["records_per_s"] / p["records_per_s"],
                     "work_records_per_s": ours["work_records_per_s"] / p["work_records_per_s"],
                     "peer_cpu_s_per_million": p["cpu_s_per_million"]["median"] / ours["cpu_s_per_million"]["median"],
                     "peer_bytes": p["bytes"]["median"] / ours["bytes"]["median"],
                     "peer_files": p["files"]["median"] / ours["files"]["median"],
                     "peer_peak_tree_rss": p["peak_tree_rss_mb"]["median"] / ours["peak_tree_rss_mb"]["median"]}
    return out


def seeds_side_by_side(run: BenchRun) -> dict:
    """One scheduled run as a whole process, ours and the peer's, on the seeds' shape."""
    args = run.args
    from etl.config import load_config
    topic = run.new_topic(SEEDS_PARTITIONS, "sbs-seeds")
    per = {p: SEEDS_RECORDS // SEEDS_PARTITIONS + (1 if p < SEEDS_RECORDS % SEEDS_PARTITIONS else 0)
           for p in range(SEEDS_PARTITIONS)}
    make = value_maker("json", args.record_bytes)
    produce_checked(run.stack.kafka_bootstrap, topic, {p: 1 for p in per}, make)
    ends = {p: 1 for p in per}
    ini = run.ini("sbs-seeds-ours", [topic], "json", max(per.values()) + 1)
    config = load_config(ini)
    folder, checkpoint = run.work / "sbs-seeds-peer" / "out", run.work / "sbs-seeds-peer" / "checkpoint"
    name = f"b{run.run_id[-6:]}_sbs_seeds_peer"
    run.tables.append(name)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    ours_cmd = [ETL_CLI, "run", "--json", "--config", str(ini)]
    peer_cmd = [sys.executable, "-m", "tests.perf.peer_job", "--bootstrap", run.stack.kafka_bootstrap, "--topic", topic,
                "--output", str(folder), "--checkpoint", str(checkpoint), "--parallelism", str(args.parallelism),
                "--table", f"{run.database}.{name}", "--metastore", run.stack.metastore_uri]

    def process(cmd: list[str]) -> subprocess.CompletedProcess:
        done = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            raise RuntimeError(f"{cmd[:3]} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
        return done
    _batches(process(ours_cmd))  # the first runs: tables, state and checkpoint made, the first records loaded
    _peer_said(process(peer_cmd), SEEDS_PARTITIONS)
    say(f"seeds' shape side by side: {SEEDS_RECORDS:,} JSON records in {SEEDS_PARTITIONS} partitions of {topic} "
        f"per run")
    measured: dict[str, list[dict]] = {"ours": [], "peer_json": []}
    for rep in range(1, args.repeat + 1):
        produced = produce_checked(run.stack.kafka_bootstrap, topic, per, make, start=ends)
        ranges = [(topic, p, ends[p], high) for p, (_low, high) in sorted(produced["watermarks"].items())]
        ends = {p: high for p, (_low, high) in produced["watermarks"].items()}
        order = ("ours", "peer_json") if rep % 2 else ("peer_json", "ours")
        for who in order:
            cmd = ours_cmd if who == "ours" else peer_cmd
            done, stats = run.measure(f"seeds' shape, {who} as a process #{rep}", lambda: process(cmd), tree=True)
            if who == "ours":
                said = _committed(done)
                batch = said["seconds"]
                check_loaded(config, ranges, SEEDS_RECORDS)
            else:
                said = _peer_said(done, SEEDS_RECORDS)
                batch = said["query_seconds"]
            cpu = stats["own_cpu_cores"] * stats["seconds"]
            measured[who].append({**stats, "batch_seconds": batch, "cpu_seconds": cpu, "said": said})
            say(f"  process {stats['seconds']:.2f}s, batch {batch:.2f}s, CPU {cpu:.1f}s, "
                f"peak RSS {stats['peak_new_processes_rss_mb']:.0f} MB")
    total = SEEDS_RECORDS * args.repeat + SEEDS_PARTITIONS
    all_ranges = [(topic, p, 0, ends[p]) for p in per]
    written = check_written(folder, all_ranges, total)
    out: dict = {"records": SEEDS_RECORDS, "partitions": SEEDS_PARTITIONS, "parallelism": args.parallelism,
                 "peer_output": written}
    for who, runs in measured.items():
        out[who] = {"process_seconds": summarize([m["seconds"] for m in runs]),
                    "batch_seconds": summarize([m["batch_seconds"] for m in runs]),
                    "cpu_seconds": summarize([m["cpu_seconds"] for m in runs]),
                    "peak_rss_mb": summarize([m["peak_new_processes_rss_mb"] for m in runs]),
                    "loadavg_before": [m["loadavg_before"][0] for m in runs],
                    "foreign_cpu_cores": [m["foreign_cpu_cores"] for m in runs], "runs": runs}
    ours, peer = out["ours"], out["peer_json"]
    out["ratios"] = {key: peer[key]["median"] / ours[key]["median"]
                     for key in ("process_seconds", "batch_seconds", "cpu_seconds", "peak_rss_mb")}
    return out


def _peer_said(done: subprocess.CompletedProcess, records: int) -> dict:
    """The peer process's last JSON line; an error unless it read `records` records."""
    said = json.loads([line for line in done.stdout.splitlines() if line.startswith("{")][-1])
    if said["records"] != records:
        raise RuntimeError(f"the peer read {said['records']} records, expected {records}: {said}")
    return said
