"""Where a task's time goes: one range profiled in this process (cProfile), and py-spy on
the Spark Python workers during one more full batch."""
from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tests.harness.kills import CLEANUP, sigkill
from tests.perf.common import say
from tests.perf.context import BenchRun
from tests.perf.data import produce_checked, value_maker
from tests.perf.load import Monitor, _proc_table
from tests.perf.phases import run_job_timed
from tests.perf.spark_tasks import consume_range


def py_spy_batch(run: BenchRun, config) -> dict:
    """One more full batch (not timed), with py-spy sampling every Spark Python worker."""
    exe = shutil.which("py-spy", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    if exe is None:
        raise SystemExit("bench: --py-spy needs py-spy: .venv/bin/python -m pip install py-spy==0.4.3")
    out_dir = run.work / "py-spy"
    out_dir.mkdir(parents=True, exist_ok=True)
    workers, _daemons = Monitor._find_workers(_proc_table())
    spies = [subprocess.Popen([exe, "record", "--pid", str(pid), "--rate", "250", "--nonblocking", "--format", "raw",
                               "--output", str(out_dir / f"{pid}.txt")], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for pid in sorted(workers)]
    time.sleep(1.0)  # py-spy attaches
    say(f"py-spy: sampling workers {sorted(workers)} during one more full batch")
    try:
        phases, _said = run_job_timed(config)
    finally:
        for spy in spies:
            spy.send_signal(2)  # SIGINT: py-spy writes its file and exits
        for spy in spies:
            try:
                spy.wait(timeout=30)
            except subprocess.TimeoutExpired:
                sigkill(spy.pid, "py-spy", purpose=CLEANUP)
    return {"phases": phases, **summarize_stacks(sorted(out_dir.glob("*.txt")))}

# -- 4: fixed cost -------------------------------------------------------------------------


def profile(run: BenchRun) -> None:
    """One range, in this process: the reader alone, reader + decode, and the whole task
    (etl.job.tasks.run_range_task) under cProfile."""
    import cProfile
    import pstats
    from etl.config import load_config
    from etl.source.ranges import read_range
    from etl.job.assemble import writer_spec
    from etl.rows.decoders.writer_schemas import WriterSchemas
    from etl.job.tasks import RangeTask, run_range_task
    from etl.model.batch import OffsetRange
    data = run.report.get("data")
    if data is None:
        topic = run.new_topic(1, "profile")
        n = run.args.records // run.args.partitions
        produced = produce_checked(run.stack.kafka_bootstrap, topic, {0: n},
                                   value_maker(run.args.decoder, run.args.record_bytes))
        t, p, s, e = topic, 0, *produced["watermarks"][0]
    else:
        t, p, s, e = data["ranges"][0]
    config = load_config(run.ini("profile", [t], run.args.decoder, e - s + 1))
    registry = config.schema_registry
    spec = writer_spec(config, WriterSchemas(registry, config.retry) if registry else None)
    out: dict = {"range": [t, p, s, e]}

    def timed(label, fn):
        run.gate.wait(label)
        started = time.monotonic()
        fn()
        out[label] = time.monotonic() - started
        say(f"profile: {label} {out[label]:.2f}s ({(e - s) / out[label]:,.0f} records/s)")

    def reader():
        for _chunk in read_range(config.kafka, "etl-bench", t, p, s, e, with_keys=False):
            pass

    def reader_decode():
        for chunk in read_range(config.kafka, "etl-bench", t, p, s, e, with_keys=False):
            spec.decoder.decode(chunk.values)

    def raw():
        for _records in consume_range({"bootstrap.servers": run.stack.kafka_bootstrap}, t, p, s, e):
            pass

    timed("consume_only", raw)
    timed("read_range", reader)
    timed("read_range+decode", reader_decode)
    main_dir = str(run.work / "profile" / "main")
    rejected_dir = str(run.work / "profile" / "rejected")
    task = RangeTask(OffsetRange(t, p, s, e, None), main_dir, rejected_dir, config.warehouse, config.kafka,
                     "etl-bench", spec)
    os.makedirs(main_dir, exist_ok=True)
    timed("run_range_task", lambda: run_range_task(task))
    shutil.rmtree(run.work / "profile", ignore_errors=True)
    os.makedirs(main_dir, exist_ok=True)
    profiler = cProfile.Profile()
    profiler.enable()
    run_range_task(task)
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(25)
    out["cprofile_top_tottime"] = text.getvalue()
    shutil.rmtree(run.work / "profile", ignore_errors=True)
    run.report["profile"] = out


def summarize_stacks(files: list[Path]) -> dict:
    """Self and inclusive sample counts per function, from py-spy's collapsed stacks, counting
    only stacks inside the ETL's task (etl.job.tasks.run_range_task): the worker's idle time is not
    the task's."""
    own: dict[str, int] = {}
    inclusive: dict[str, int] = {}
    total = 0
    for file in files:
        for line in file.read_text(errors="replace").splitlines():
            stack, _, count = line.rpartition(" ")
            if not count.isdigit() or "run_range_task" not in stack:
                continue
            n = int(count)
            total += n
            frames = [_frame_name(f) for f in stack.split(";")]
            own[frames[-1]] = own.get(frames[-1], 0) + n
            for frame in set(frames[frames.index(next(f for f in frames if "run_range_task" in f)):]):
                inclusive[frame] = inclusive.get(frame, 0) + n

    def top(d: dict) -> list:
        return [[name, count, round(100 * count / total, 1)] for name, count in
                sorted(d.items(), key=lambda kv: -kv[1])[:25]] if total else []
    return {"task_samples": total, "self_top": top(own), "inclusive_top": top(inclusive)}


def _frame_name(frame: str) -> str:
    """'func (path/to/file.py:123)' -> 'func (file.py:123)', shorter and still unique enough."""
    name, _, where = frame.partition(" (")
    where = where.rstrip(")")
    return f"{name} ({where.rsplit('/', 1)[-1]})" if where else name
