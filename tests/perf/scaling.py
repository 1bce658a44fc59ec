"""Partition scaling: plan and commit time, and znode sizes, for topics of N partitions (or
on ZooKeeper alone, when the broker cannot create the topic)."""
from __future__ import annotations

import json
import time

from tests.harness.kafka import watermarks
from tests.perf.common import say
from tests.perf.context import BenchRun, zk_client
from tests.perf.data import produce_checked, value_maker
from tests.perf.phases import check_loaded, run_job_timed


def partition_scaling(run: BenchRun) -> None:
    from etl.config import load_config
    counts = [int(x) for x in run.args.partition_scaling.split(",")]
    k = run.args.scaling_records
    out = []
    for n in counts:
        label = f"parts-{n}"
        entry: dict = {"partitions": n, "records_per_partition_per_batch": k}
        try:
            if run.args.scaling_zk_only:
                raise RuntimeError("--scaling-zk-only")
            topic = run.new_topic(n, label)
        except Exception as exc:
            say(f"{n} partitions: the broker could not create the topic ({exc}); measuring ZooKeeper only")
            entry.update(mode="zookeeper-only", broker_error=str(exc), **zk_only_scaling(run, n, label))
            out.append(entry)
            continue
        entry["mode"] = "full job"
        run.start_spark()
        make = value_maker(run.args.decoder, run.args.record_bytes)
        config = load_config(run.ini(label, [topic], run.args.decoder, 10 * k + 10))
        batches = []
        for batch_no in range(1, run.args.scaling_batches + 1):
            started = time.monotonic()
            before = watermarks(topic, bootstrap=run.stack.kafka_bootstrap)
            produce_checked(run.stack.kafka_bootstrap, topic, {p: k for p in range(n)}, make,
                            start={p: before[p][1] for p in range(n)},
                            first_ids={p: p * 1000 + before[p][1] for p in range(n)})
            marks = watermarks(topic, bootstrap=run.stack.kafka_bootstrap)
            say(f"{n} partitions: produced {n * k} records in {time.monotonic() - started:.1f}s")
            ranges = [(topic, p, before[p][1], marks[p][1]) for p in range(n)]
            (phases, said), stats = run.measure(f"{n} partitions, batch {batch_no}", lambda: run_job_timed(config))
            loaded = check_loaded(config, ranges, n * k)
            batches.append({"batch": batch_no, "phases": phases, **stats, "loaded": loaded,
                            "znodes": znode_sizes(run, config, loaded["batch_id"]), "job_said": said})
        (phases, said), stats = run.measure(f"{n} partitions, nothing new", lambda: run_job_timed(config))
        entry.update(batches=batches, no_data={"phases": phases, **stats, "job_said": said})
        out.append(entry)
        run.delete_topic(topic)
    run.report["partition_scaling"] = out


def znode_sizes(run: BenchRun, config, batch_id: int) -> dict:
    """The batch's znodes and the committed snapshot's, and the size of the commit request."""
    from etl.state.store import ZkPaths
    paths = ZkPaths(config.zookeeper.root, config.job.name)
    client = zk_client(run.stack)
    try:
        header = client.exists(paths.batch(batch_id)).dataLength
        plan = paths.plan(batch_id)
        chunk_sizes = [client.exists(f"{plan}/{c}").dataLength for c in sorted(client.get_children(plan))]
        beside = [client.exists(f"{paths.batch(batch_id)}/{c}").dataLength
                  for c in sorted(client.get_children(paths.batch(batch_id)))]
        pointer, _ = client.get(paths.committed)
        snapshot = paths.snapshot(json.loads(pointer)["snapshot"])
        snapshot_sizes = [client.exists(f"{snapshot}/{c}").dataLength for c in client.get_children(snapshot)]
    finally:
        client.stop()
        client.close()
    # The commit is one multi-op request: 2 fence checks, the snapshot's check, the pointer's set,
    # the header's set. Jute sizes: op header 9 B; path and data 4 B + bytes; version 4 B.
    checks = 2 * (9 + 4 + len(paths.lock) + 4) + 9 + 4 + len(snapshot) + 4
    txn = checks + 9 + 4 + len(paths.committed) + 4 + len(pointer) + 4 + 9 + 4 + len(paths.batch(batch_id)) + 4 \
        + header + 4
    return {"header_bytes": header, "range_chunks": len(chunk_sizes), "range_chunk_bytes": chunk_sizes,
            "beside_header_bytes": beside, "snapshot_chunks": len(snapshot_sizes),
            "snapshot_chunk_max_bytes": max(snapshot_sizes, default=0), "commit_request_bytes_estimate": txn}


def zk_only_scaling(run: BenchRun, n: int, label: str) -> dict:
    """No topic: plan, store, advance and commit a batch of n ranges with etl.state.store directly,
    with a last-record fingerprint per partition set at WRITTEN, as a real batch has."""
    from etl.config import load_config
    from etl.state.store import ZkStateStore
    config = load_config(run.ini(label, ["zk-only"], run.args.decoder, 1000))
    results = []
    with ZkStateStore(config.zookeeper, config.job.name, config.retry) as store:
        if store.session.acquire_lock() is not None:
            raise RuntimeError("lock held")
        try:
            for batch_no in (1, 2):
                timings, ok = _zk_only_batch(store, n, run.args.scaling_records, batch_no)
                results.append({"batch": batch_no, "timings": timings, "offsets_match": ok,
                                "znodes": znode_sizes(run, config, batch_no)})
                store.batches.prune_batches()
        finally:
            store.session.release_lock()
    return {"batches": results}


def _zk_only_batch(store, n: int, k: int, batch_no: int) -> tuple[dict, bool]:
    """One batch's ZooKeeper work, each step timed: reads (and plan), plan write, WRITTEN (with
    each partition's last record), REGISTERED (the snapshot of the offsets after the batch), commit."""
    from etl.model.batch import Batch, BatchState, OffsetRange, utc_now, utc_now_iso
    from etl.model.identity import RecordFingerprint
    from etl.model.partitioning import PLANNING_TIME_HOURLY
    timings = {}
    store.offsets._state_cache = None  # read as a new run does, not from the snapshot this process cached
    started = time.monotonic()
    committed = store.offsets.committed_offsets()
    timings["zk_reads"] = time.monotonic() - started
    ranges = tuple(OffsetRange("zk-only", p, (batch_no - 1) * k, batch_no * k,
                               committed[("zk-only", p)].value if ("zk-only", p) in committed else None)
                   for p in range(n))
    now = utc_now()
    batch = Batch(batch_no, BatchState.PLANNED, now.isoformat(timespec="seconds"),
                  PLANNING_TIME_HOURLY.values_for_plan(now), ranges, planned_by=store.session.me.describe(),
                  updated_at=utc_now_iso())
    last = {f"zk-only:{p}": RecordFingerprint(batch_no * k - 1, 1767225600000 + p, f"{p:016x}") for p in range(n)}
    steps = [("write_plan", lambda b, v: (b, store.batches.write_plan(b))),
             ("written", lambda b, v: store.batches.advance(b, v, BatchState.WRITTEN, rows=n * k, rejected=0,
                                                    last_records=last)),
             ("registered", lambda b, v: store.batches.advance(b, v, BatchState.REGISTERED)),
             ("commit", lambda b, v: (store.batches.commit(b, v), v))]
    version = None
    for name, step in steps:
        started = time.monotonic()
        batch, version = step(batch, version)
        timings[name] = time.monotonic() - started
    timings["total"] = sum(timings.values())
    offsets = store.offsets.committed_offsets()
    ok = len(offsets) == n and all(offsets[("zk-only", p)].value == batch_no * k
                                   and offsets[("zk-only", p)].last.to_json() == last[f"zk-only:{p}"]
                                   for p in range(n))
    return timings, ok

# -- 5b: profile ---------------------------------------------------------------------------
