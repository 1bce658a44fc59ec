"""Racing attempts of one task, in separate processes."""
from __future__ import annotations

import multiprocessing
import os
import time
from dataclasses import dataclass
from pathlib import Path

from tests.harness.kills import CLEANUP, sigkill
from tests.harness.warehouse_files import TEMP_PREFIX


def _race_worker(task, barrier, results, index: int, env: dict) -> None:
    os.environ.update(env)
    from etl.job.tasks import run_range_task
    barrier.wait(120)
    try:
        result = run_range_task(task)
        results.put((index, result.published, result.rows, result.rejected, None))
    except BaseException as exc:  # report it, the parent asserts
        results.put((index, None, None, None, f"{type(exc).__name__}: {exc}"))


@dataclass
class RaceOutcome:
    published: list[bool]
    rows: list[int]
    errors: list[str]
    max_concurrent_temp_files: int


def race_range_task(task, attempts: int, env: dict | None = None, timeout: float = 300) -> RaceOutcome:
    """Run `etl.job.tasks.run_range_task(task)` in `attempts` spawned processes released at the
    same instant by a barrier, while watching how many temp files of the range exist at once."""
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(attempts), ctx.Queue()
    procs = [ctx.Process(target=_race_worker, args=(task, barrier, results, i, env or {}), daemon=True)
             for i in range(attempts)]
    for proc in procs:
        proc.start()
    final = task.range.name_as(task.writer.layout.file_format)
    max_temps, collected = 0, []
    deadline = time.monotonic() + timeout
    try:
        while len(collected) < attempts:
            names = os.listdir(task.main_dir) if os.path.isdir(task.main_dir) else []
            max_temps = max(max_temps, sum(1 for n in names if n.startswith(TEMP_PREFIX) and final in n))
            try:
                collected.append(results.get(timeout=0.02))
            except Exception:  # queue.Empty
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"racing attempts did not finish within {timeout}s")
    finally:
        for proc in procs:
            proc.join(30)
            if proc.is_alive():
                sigkill(proc.pid, "racing task attempt", purpose=CLEANUP)
    collected.sort()
    return RaceOutcome([c[1] for c in collected], [c[2] for c in collected], [c[4] for c in collected if c[4]],
                       max_temps)


def range_task_for(config: Path | str, topic: str, partition: int, start: int, end: int, expected: int | None,
                   partition_values: dict[str, str]):
    """The RangeTask exactly as etl.job.driver.Job._run_tasks builds it for one planned range
    (field by field, so that it follows the driver when RangeTask gains or renames a field)."""
    import dataclasses

    from etl.config import load_config
    from etl.job.assemble import writer_spec
    from etl.job.tasks import RangeTask
    from etl.model.batch import OffsetRange
    from etl.model.naming import partition_dir
    from etl.sink.warehouse import Warehouse
    cfg = load_config(config)
    warehouse = Warehouse.of(cfg)
    values = {
        "range": OffsetRange(topic, partition, start, end, expected),
        "main_dir": partition_dir(warehouse.table_root, partition_values),
        "rejected_dir": partition_dir(warehouse.rejected_root, partition_values),
        "warehouse": cfg.warehouse, "warehouse_url": cfg.warehouse.url, "kafka": cfg.kafka,
        "consumer_group": f"etl-{cfg.job.name}-reader", "writer": writer_spec(cfg),
    }
    return RangeTask(**{f.name: values[f.name] for f in dataclasses.fields(RangeTask) if f.name in values})
