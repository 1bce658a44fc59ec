"""Compaction (`etl compact`): one Hive partition of ~500 small files, before and after.

  load        --compaction-records JSON records over --compaction-partitions Kafka partitions,
              loaded by run_job in this process (one Spark start) in --compaction-batches batches,
              [job] max_records_per_partition chosen for that: partitions x batches small files,
              all in the one planning-time partition (it waits for the next hour when the current
              one might end while loading)
  query       SELECT kafka_partition, count(*) ... WHERE dt/hour ... GROUP BY kafka_partition
              through this process's Hive-enabled session, REFRESH TABLE, one warm-up, median of
              --repeat; before and after the compaction (the counts checked against the produced ones)
  compact     `etl compact --partition P --json` (a fresh process, min_files 2,
              keep_superseded_minutes 0): wall time, its phases from its log lines, files before
              and after, peak RSS of its Python process and of its JVM (sampled every 50 ms)
  merge       the same 18 merges by etl.compaction.merge.merge_files on copies of the inputs (taken
              before compacting), interleaved with a plain pyarrow baseline (read each input row
              group by row group, write it with pq.ParquetWriter, snappy, INT96): medians
"""
from __future__ import annotations

import calendar
import json
import math
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.harness.paths import ETL as ETL_CLI
from tests.perf.common import say, summarize
from tests.perf.context import BenchRun
from tests.perf.data import produce_checked, value_maker
from tests.perf.phases import job_state, run_job_timed

COMPACTION = "\n[compaction]\nmin_files = 2\nkeep_superseded_minutes = 0\ntarget_file_mb = 256\n" \
             "only_finished = true\nafter_run = false\n"
LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.(\d{3})Z \w+ [\w.]+: (.*)$")  # etl.logs' text, UTC
HOUR_MARGIN_S = 240  # the load takes ~1-2 minutes here: never start it this close to the hour


def compaction_bench(run: BenchRun) -> None:
    from etl.config import load_config
    args = run.args
    parts, records, batches = args.compaction_partitions, args.compaction_records, args.compaction_batches
    per_batch = math.ceil(records / parts / batches)
    counts = {p: records // parts + (1 if p < records % parts else 0) for p in range(parts)}
    run.start_spark()
    topic = run.new_topic(parts, "compact")
    produced = produce_checked(run.stack.kafka_bootstrap, topic, counts, value_maker("json", args.record_bytes))
    say(f"produced {records:,} records into {parts} partitions of {topic} in {produced['seconds']:.1f}s")
    ini = run.ini("compact", [topic], "json", per_batch)
    ini.write_text(ini.read_text() + COMPACTION)
    config = load_config(ini)
    _wait_for_hour_margin()
    started = time.monotonic()
    phases, _said = run_job_timed(config, max_batches=batches)
    load_s = time.monotonic() - started
    offsets, last = job_state(config)
    ends = {(topic, p): high for p, (_low, high) in produced["watermarks"].items()}
    if offsets != ends:
        raise RuntimeError(f"after {batches} batches the committed offsets are not the end offsets: {offsets}")
    folder, files = _partition_folder(run.work / "warehouse")
    partition = "/".join(folder.parts[-2:])
    say(f"loaded {last.batch_id} batches of <= {per_batch} records per partition in {load_s:.1f}s: "
        f"{len(files)} files in {partition}")
    bytes_before = sum(p.stat().st_size for p in files)
    aside = run.work / "compaction-inputs"
    aside.mkdir()
    for path in files:
        shutil.copyfile(path, aside / path.name)
    table = f"`{run.database}`.`{config.hive.table}`"
    dt_value, hour_value = (part.split("=", 1)[1] for part in partition.split("/"))
    sql = (f"SELECT kafka_partition, count(*) AS n FROM {table} WHERE dt = '{dt_value}' AND hour = '{hour_value}' "
           f"GROUP BY kafka_partition")
    before = _queries(run, table, sql, counts, "before")
    compacted = _compact(run, ini, partition)
    plan = compacted["plan"]
    target = folder.parents[1] / plan["target"]
    after_files = sorted(p for p in target.iterdir() if p.suffix == ".parquet")
    left = [p for p in folder.iterdir() if p.suffix == ".parquet"] if folder.exists() else []
    if len(plan["inputs"]) != len(files) or len(after_files) != parts or plan["rows"] != records or left:
        raise RuntimeError(f"compaction: {len(plan['inputs'])} inputs, {len(after_files)} outputs in {target}, "
                           f"{plan['rows']} rows, {len(left)} files left in {folder}")
    if "merge_seconds" in compacted:  # the newest merged file's mtime splits PLANNED -> SWITCHED
        written = max(p.stat().st_mtime for p in after_files)
        compacted.update(merge_written_seconds=written - compacted.pop("planned_at"),
                         switch_seconds=compacted.pop("switched_at") - written)
    after = _queries(run, table, sql, counts, "after")
    merge = _merges(run, aside, plan, config)
    run.delete_topic(topic)
    run.report["compaction"] = {
        "records": records, "kafka_partitions": parts, "batches": last.batch_id,
        "max_records_per_partition": per_batch, "partition": partition, "load_seconds": load_s,
        "load_phases": {k: phases[k] for k in ("plan", "tasks", "register", "commit", "batch", "run_total")},
        "files_before": len(files), "bytes_before": bytes_before,
        "files_after": len(after_files), "bytes_after": sum(p.stat().st_size for p in after_files),
        "query_before": before, "query_after": after, "compact": {k: v for k, v in compacted.items() if k != "plan"},
        "merge": merge,
        "ratios": {"query_speedup": before["seconds"]["median"] / after["seconds"]["median"],
                   "merge_files_vs_pyarrow": merge["pyarrow"]["median"] / merge["merge_files"]["median"],
                   "etl_compact_merge_vs_pyarrow": merge["pyarrow"]["median"] / compacted["merge_written_seconds"]
                   if compacted.get("merge_written_seconds") else None},
    }


def _wait_for_hour_margin() -> None:
    """All batches must be planned within one hour: the planning-time partition is the hour."""
    left = 3600 - time.time() % 3600
    if left < HOUR_MARGIN_S:
        say(f"the hour ends in {left:.0f}s, less than the load may take: waiting for the next one")
        time.sleep(left + 2)


def _partition_folder(warehouse: Path) -> tuple[Path, list[Path]]:
    from etl.model.naming import parse_final_name
    folders: dict[Path, list[Path]] = {}
    for path in warehouse.rglob("*.parquet"):
        if parse_final_name(path.name) is not None:
            folders.setdefault(path.parent, []).append(path)
    if len(folders) != 1:
        raise RuntimeError(f"the load wrote into {len(folders)} partitions, not one (did the hour change while "
                           f"loading?): {sorted(str(f) for f in folders)}")
    [(folder, files)] = folders.items()
    return folder, sorted(files)


def _queries(run: BenchRun, table: str, sql: str, counts: dict[int, int], when: str) -> dict:
    run.spark.sql(f"REFRESH TABLE {table}")
    started = time.monotonic()
    got = {row["kafka_partition"]: row["n"] for row in run.spark.sql(sql).collect()}
    warm = time.monotonic() - started
    if got != counts:
        raise RuntimeError(f"GROUP BY {when} the compaction: {got} differs from what was produced: {counts}")
    seconds, stats = [], []
    for rep in range(1, run.args.repeat + 1):
        _, measured = run.measure(f"GROUP BY kafka_partition, {when} the compaction #{rep}",
                                  lambda: run.spark.sql(sql).collect())
        seconds.append(measured["seconds"])
        stats.append(measured)
    return {"warm_up_seconds": warm, "seconds": summarize(seconds),
            "loadavg_before": [s["loadavg_before"][0] for s in stats],
            "foreign_cpu_cores": [s["foreign_cpu_cores"] for s in stats]}


def _compact(run: BenchRun, ini: Path, partition: str) -> dict:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "ETL_LOG_FORMAT": "text"}
    command = [ETL_CLI, "compact", "--config", str(ini), "--partition", partition, "--execute", "--json"]
    run.gate.wait("etl compact")
    wall_start = time.time()
    started = time.monotonic()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    sampler = RssSampler(process.pid)
    sampler.start()
    try:
        out, err = process.communicate(timeout=600)
    finally:
        sampler.stop()
    seconds = time.monotonic() - started
    if process.returncode != 0:
        raise RuntimeError(f"`{' '.join(command)}` exited {process.returncode}:\n{out[-2000:]}\n{err[-4000:]}")
    found = json.loads(out[out.index("{"):])
    if len(found["compacted"]) != 1:
        raise RuntimeError(f"etl compact compacted {len(found['compacted'])} partitions: {json.dumps(found)[:2000]}")
    marks = _log_marks(err)
    say(f"etl compact: {seconds:.1f}s in all; peak RSS Python {sampler.peak['python'] / 2**20:.0f} MB, "
        f"JVM {sampler.peak['jvm'] / 2**20:.0f} MB; log marks {marks}")
    phases = {}
    if {"planned", "switched"} <= marks.keys():
        phases = {"start_to_planned": marks["planned"] - wall_start,
                  "merge_seconds": marks["switched"] - marks["planned"],
                  "switched_to_exit": wall_start + seconds - marks["switched"],
                  "planned_at": marks["planned"], "switched_at": marks["switched"]}
    return {"process_seconds": seconds, **phases, "peak_rss_python_mb": sampler.peak["python"] / 2**20,
            "peak_rss_jvm_mb": sampler.peak["jvm"] / 2**20, "peak_rss_tree_mb": sampler.peak["tree"] / 2**20,
            "rss_samples": sampler.samples, "plan": found["compacted"][0]}


def _log_marks(stderr: str) -> dict[str, float]:
    """Epoch seconds of the compaction's own log lines: PLANNED (Spark up, footers read, plan
    stored), the describe line once SWITCHED (merged, published, ALTER TABLE done), deleted."""
    marks = {}
    for line in stderr.splitlines():
        match = LOG_LINE.match(line)
        if not match:
            continue
        at = calendar.timegm(time.strptime(match[1], "%Y-%m-%dT%H:%M:%S")) + int(match[2]) / 1000
        text = match[3]
        if re.match(r"compaction \d+ PLANNED", text):
            marks["planned"] = at
        elif text.startswith("compaction ") and text.endswith(", SWITCHED"):
            marks["switched"] = at
        elif "superseded files" in text:
            marks["deleted"] = at
    return marks


class RssSampler:
    """Every 50 ms: the RSS of the process, of its JVM (a java descendant) and of its whole tree."""

    def __init__(self, pid: int, interval: float = 0.05):
        import psutil
        self.root, self.interval, self.samples = psutil.Process(pid), interval, 0
        self.peak = {"python": 0, "jvm": 0, "tree": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="compact-rss", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        import psutil
        while not self._stop.is_set():
            try:
                python = self.root.memory_info().rss
                tree, jvm = python, 0
                for child in self.root.children(recursive=True):
                    try:
                        rss = child.memory_info().rss
                        tree += rss
                        jvm = max(jvm, rss if child.name() == "java" else 0)
                    except psutil.Error:
                        pass
            except psutil.Error:
                return  # the process is gone
            self.peak = {"python": max(self.peak["python"], python), "jvm": max(self.peak["jvm"], jvm),
                         "tree": max(self.peak["tree"], tree)}
            self.samples += 1
            self._stop.wait(self.interval)


def _merges(run: BenchRun, aside: Path, plan: dict, config) -> dict:
    """merge_files (the compaction's own merge) and plain pyarrow on the same 18 groups, interleaved."""
    from etl.sink.fs.factory import filesystem_for
    from etl.compaction.merge import merge_files
    from etl.sink.layout import FileLayout
    fs = filesystem_for(config.warehouse)
    ranges = {name: [tuple(r) for r in file_ranges] for name, _size, _rows, file_ranges in plan["inputs"]}
    groups = [(name, [str(aside / i) for i in inputs], sorted(r for i in inputs for r in ranges[i]))
              for name, inputs in plan["outputs"]]
    rows = plan["rows"]
    seconds: dict[str, list[float]] = {"merge_files": [], "pyarrow": []}
    out_bytes: dict[str, int] = {}
    for rep in range(1, run.args.repeat + 1):
        for kind in ("merge_files", "pyarrow"):
            out = run.work / f"merge-{kind}-{rep}"
            out.mkdir()

            def go():
                if kind == "merge_files":
                    return sum(merge_files(fs, sources, str(out / name), file_ranges, config.job.row_group_size,
                                           FileLayout.of(config)) for name, sources, file_ranges in groups)
                return sum(_pyarrow_merge(sources, out / name) for name, sources, _ in groups)
            written, stats = run.measure(f"{kind}: {len(plan['inputs'])} files into {len(groups)} #{rep}", go)
            if written != rows:
                raise RuntimeError(f"{kind} wrote {written} rows, the inputs hold {rows}")
            seconds[kind].append(stats["seconds"])
            out_bytes[kind] = sum(p.stat().st_size for p in out.iterdir())
            shutil.rmtree(out)
    return {**{k: summarize(v) for k, v in seconds.items()}, "output_bytes": out_bytes}


def _pyarrow_merge(sources: list[str], target: Path) -> int:
    import pyarrow.parquet as pq
    rows = 0
    writer = None
    for source in sources:
        parquet = pq.ParquetFile(source)
        if writer is None:
            writer = pq.ParquetWriter(str(target), parquet.schema_arrow, compression="snappy",
                                      use_deprecated_int96_timestamps=True)
        for index in range(parquet.num_row_groups):
            group = parquet.read_row_group(index)
            writer.write_table(group)
            rows += group.num_rows
    writer.close()
    return rows
