"""Peak Python worker RSS: one partition-batch of each size (flat memory is the target)."""
from __future__ import annotations

from tests.perf.common import rate, say
from tests.perf.context import BenchRun
from tests.perf.data import produce_checked, value_maker
from tests.perf.phases import check_loaded, run_job_timed


def memory_check(run: BenchRun) -> None:
    from etl.config import load_config
    sizes = [int(x) for x in run.args.memory_records.split(",")]
    run.start_spark()
    out = []
    for n in sizes:
        label = f"mem-{n}"
        topic = run.new_topic(1, label)
        say(f"producing {n:,} records into {topic} (1 partition)")
        produced = produce_checked(run.stack.kafka_bootstrap, topic, {0: n},
                                   value_maker(run.args.decoder, run.args.record_bytes))
        say(f"produced in {produced['seconds']:.1f}s")
        ranges = [(topic, 0, *produced["watermarks"][0])]
        config = load_config(run.ini(label, [topic], run.args.decoder, n + 1))
        (phases, said), stats = run.measure(f"full batch, one partition of {n:,}", lambda: run_job_timed(config),
                                             workers=True)
        loaded = check_loaded(config, ranges, n)
        out.append({"records": n, "value_bytes": produced["bytes"], "row_group_size": config.job.row_group_size,
                    **stats, "phases": phases, "batch_rate": rate(n, produced["bytes"], phases["batch"]),
                    "loaded": loaded, "job_said": said})
        run.delete_topic(topic)  # the broker holds topics in memory
    run.report["memory"] = out

# -- 5: partitions -------------------------------------------------------------------------
