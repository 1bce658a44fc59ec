"""A seeded random campaign of operator mistakes against a loaded job, on the real stack.

Each scenario loads a topic, applies one to three mistakes drawn from {delete a file, delete a
partition's files, truncate a file, recreate the topic bigger or smaller, point the job at
another table, another warehouse URL, a second job on the table, reset backwards (with and
without --move-aside, and inside a file) or forwards}, produces more, then runs `verify`,
`recover`, `run` and `verify --deep` through the real CLI entry point.

The oracle, independent of the ETL's own bookkeeping: the test knows every record it produced
(each carries a unique event_id) and which of them the table must hold exactly once. A
mistaken command must refuse with exit 2, a message, and no change (ZooKeeper offsets and the
warehouse files as before). At the end, either the table holds exactly what it must and
`verify --deep` exits 0, or `run` or `verify --deep` exits non-zero: never both 0 over lost or
duplicated rows.

CI runs the fixed seed 20261127; ETL_OPERATOR_SEED draws another or replays a printed one;
ETL_OPERATOR_SCENARIOS sets its length (CI: 3).
"""
from __future__ import annotations

import os
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from etl import cli
from etl.config import load_config
from etl.state.store import ZkStateStore
from tests.harness.campaign import campaign_seed
from tests.harness.data import event
from test_pipeline import recreate_topic

DB = "etl_test"
PARTITIONS = 2
MISTAKES = ("delete_file", "delete_partition", "truncate_file", "recreate_bigger", "recreate_smaller",
            "other_table", "other_url", "second_job", "reset_backwards", "reset_forwards")


@dataclass
class Scenario:
    topic: str
    config: Path
    table: str
    warehouse: Path
    produce: object
    next_id: int = 0
    must_have: set[int] = field(default_factory=set)  # event_ids the table must hold once
    must_not: set[int] = field(default_factory=set)  # event_ids deliberately skipped
    recreated: bool = False
    log: list[str] = field(default_factory=list)

    def send(self, per_partition: int) -> list[int]:
        """Produce per_partition new records to each partition; return their event_ids in
        partition order."""
        ids = {p: list(range(self.next_id + p * per_partition, self.next_id + (p + 1) * per_partition))
               for p in range(PARTITIONS)}
        self.next_id += PARTITIONS * per_partition
        self.produce(self.topic, {p: [event(i) for i in ids[p]] for p in ids})
        return ids

    def files(self, partition: int | None = None) -> list[Path]:
        root = self.warehouse / f"{DB}.db" / self.table
        return sorted(f for f in root.rglob("*.parquet") if partition is None or f"+{partition}+" in f.name)


def etl(*args: str) -> tuple[int, str]:
    import contextlib
    import io
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(args))
    return code, out.getvalue() + err.getvalue()


def committed(config: Path) -> dict:
    cfg = load_config(config)
    with ZkStateStore(cfg.zookeeper, cfg.job.name, cfg.retry) as store:
        return {key: offset.value for key, offset in store.offsets.committed_offsets().items()}


def snapshot(s: Scenario) -> tuple:
    return committed(s.config), sorted(str(p) for p in s.warehouse.rglob("*") if p.is_file())


def expect_refusal(s: Scenario, *args: str) -> None:
    before = snapshot(s)
    code, text = etl(*args)
    s.log.append(f"  {' '.join(args[:1] + args[3:])} -> {code}: "
                 f"{text.strip().splitlines()[-1] if text.strip() else ''}")
    assert code == 2, f"expected a refusal (exit 2):\n{text[-3000:]}"
    assert "nothing" in text.lower() or "refused" in text.lower(), text[-3000:]
    assert snapshot(s) == before, "a refused command changed the job's state or files"


def apply(mistake: str, s: Scenario, rng: random.Random, write_config, kafka_admin, tmp_path: Path) -> None:
    files = s.files()
    if mistake == "delete_file" and files:
        rng.choice(files).unlink()
    elif mistake == "delete_partition":
        for f in s.files(rng.randrange(PARTITIONS)):
            f.unlink()
    elif mistake == "truncate_file" and files:
        victim = rng.choice(files)
        victim.write_bytes(victim.read_bytes()[: max(8, victim.stat().st_size // 2)])
    elif mistake in ("recreate_bigger", "recreate_smaller"):
        recreate_topic(kafka_admin, s.topic, PARTITIONS)
        s.recreated = True
        s.send(rng.randint(70, 120) if mistake == "recreate_bigger" else rng.randint(1, 15))
    elif mistake == "other_table":
        other = write_config(kafka={"topics": s.topic}, hive={"table": f"{s.table}_other"},
                             job={"name": load_config(s.config).job.name})
        expect_refusal(s, "run", "--config", str(other))
    elif mistake == "other_url":
        other = write_config(kafka={"topics": s.topic}, hive={"table": s.table},
                             job={"name": load_config(s.config).job.name},
                             warehouse={"url": f"file://{tmp_path}/moved-warehouse"})
        expect_refusal(s, "run", "--config", str(other))
    elif mistake == "second_job":
        other = write_config(kafka={"topics": s.topic}, hive={"table": s.table},
                             job={"name": f"second-{rng.randrange(10**6)}", "max_records_per_partition": "20"})
        expect_refusal(s, "run", "--config", str(other))
    elif mistake == "reset_backwards" and not s.recreated:
        _reset_backwards(s, rng)
    elif mistake == "reset_forwards" and not s.recreated:
        _reset_forwards(s, rng)


def _reset_backwards(s: Scenario, rng: random.Random) -> None:
    partition = rng.randrange(PARTITIONS)
    ranges = sorted({tuple(int(x) for x in f.stem.split("+")[2:4]) for f in s.files(partition)})
    if not ranges:
        return
    start, end = rng.choice(ranges)
    if end - start > 1 and rng.random() < 0.3:  # inside a file: always refused
        expect_refusal(s, "reset-offsets", "--config", str(s.config), "--to", f"{s.topic}:{partition}={start + 1}",
                       "--execute", "--move-aside")
    elif rng.random() < 0.4:  # over committed files without --move-aside: refused
        expect_refusal(s, "reset-offsets", "--config", str(s.config), "--to", f"{s.topic}:{partition}={start}",
                       "--execute")
    else:
        before = committed(s.config)[(s.topic, partition)]
        code, text = etl("reset-offsets", "--config", str(s.config), "--to", f"{s.topic}:{partition}={start}",
                         "--execute", "--move-aside")
        s.log.append(f"  reset {partition} -> {start} --move-aside: {code}")
        assert code == 0, text[-3000:]
        # The partition is read again from `start`: records an earlier forward reset skipped past
        # are loaded too, as a consumer group reset to that offset would read them.
        reloaded = _ids_at(s, partition, start, before) & s.must_not
        s.must_not -= reloaded
        s.must_have |= reloaded


def _reset_forwards(s: Scenario, rng: random.Random) -> None:
    partition = rng.randrange(PARTITIONS)
    ids = s.send(10)
    s.must_have.update(i for p in ids for i in ids[p])
    offset = committed(s.config)[(s.topic, partition)]
    skip = rng.randint(1, 10)
    code, text = etl("reset-offsets", "--config", str(s.config), "--to", f"{s.topic}:{partition}={offset + skip}",
                     "--execute")
    s.log.append(f"  reset {partition} -> {offset + skip} (forwards over {skip}): {code}")
    assert code == 0, text[-3000:]
    # The next `skip` records of the partition are skipped on purpose: the ones produced just now, unless
    # earlier records of that partition were still unloaded (then those are the skipped ones).
    skipped = _ids_at(s, partition, offset, offset + skip)
    s.must_have -= skipped
    s.must_not |= skipped


def _ids_at(s: Scenario, partition: int, start: int, end: int) -> set[int]:
    from confluent_kafka import Consumer, TopicPartition
    import json
    consumer = Consumer({"bootstrap.servers": os.environ.get("ETL_KAFKA_BOOTSTRAP", "127.0.0.1:9092"),
                         "group.id": "campaign", "enable.auto.commit": False})
    consumer.assign([TopicPartition(s.topic, partition, start)])
    found = set()
    try:
        while len(found) < end - start:
            for message in consumer.consume(end - start, timeout=5):
                if message.error() is None and message.offset() < end:
                    found.add(json.loads(message.value())["event_id"])
    finally:
        consumer.close()
    return found


def table_ids(spark, s: Scenario) -> Counter | None:
    """event_id counts in the table as Hive serves it; None when the table cannot be read."""
    try:
        spark.sql(f"REFRESH TABLE `{DB}`.`{s.table}`")
        return Counter(r[0] for r in spark.sql(f"SELECT event_id FROM `{DB}`.`{s.table}`").collect())
    except Exception as exc:  # a broken file fails every read: that is what the oracle must see flagged
        s.log.append(f"  table unreadable: {str(exc).splitlines()[0][:200]}")
        return None


def test_random_operator_mistakes_never_pass_both_run_and_verify_over_bad_data(
        spark, new_topic, produce, write_config, hive_table_name, warehouse_dir, kafka_admin, tmp_path, capsys):
    seed = campaign_seed("ETL_OPERATOR_SEED", 20261127)
    scenarios = int(os.environ.get("ETL_OPERATOR_SCENARIOS", "3"))
    with capsys.disabled():
        print(f"\noperator campaign: {seed}, {scenarios} scenarios (ETL_OPERATOR_SCENARIOS)")
    rng = random.Random(seed.value)
    for number in range(scenarios):
        topic = new_topic(partitions=PARTITIONS)
        table = f"{hive_table_name}_{number}"
        config = write_config(kafka={"topics": topic}, hive={"table": table},
                              job={"name": f"campaign-{number}", "max_records_per_partition": "20"})
        s = Scenario(topic, config, table, warehouse_dir, produce)
        ids = s.send(rng.randint(30, 70))
        s.must_have.update(i for p in ids for i in ids[p])
        assert etl("run", "--config", str(config))[0] == 0
        mistakes = rng.sample(MISTAKES, rng.randint(1, 3))
        s.log.append(f"scenario {number} (seed {seed.value}): {mistakes}")
        for mistake in mistakes:
            apply(mistake, s, rng, write_config, kafka_admin, tmp_path)
        ids = s.send(10)
        if not s.recreated:
            s.must_have.update(i for p in ids for i in ids[p])
        codes = {}
        for step, args in (("verify", ["verify"]), ("recover", ["recover", "--execute"]), ("run", ["run"]),
                           ("verify --deep", ["verify", "--deep"])):
            codes[step], text = etl(args[0], "--config", str(config), *args[1:])
            s.log.append(f"  {step}: exit {codes[step]}: {' | '.join(text.strip().splitlines()[-3:])[:400]}")
        found = table_ids(spark, s)
        bad = _judge(s, found)
        s.log.append(f"  oracle: {bad or 'exactly once'}")
        with capsys.disabled():
            print("\n".join(s.log))
        if bad:
            assert not (codes["run"] == 0 and codes["verify --deep"] == 0), \
                f"{seed}: run and verify --deep both exited 0 over {bad}\n" + "\n".join(s.log)
        elif not s.recreated:
            assert codes["verify --deep"] == 0 and codes["run"] == 0, f"{seed}\n" + "\n".join(s.log)


def _judge(s: Scenario, found: Counter | None) -> str:
    if found is None:
        return "an unreadable table"
    duplicated = sorted(i for i, n in found.items() if n > 1)
    missing = sorted(s.must_have - set(found))
    unexpected = sorted(set(found) - s.must_have)
    problems = [f"{len(ids)} {what} (e.g. {ids[:5]})" for what, ids in
                (("duplicated", duplicated), ("missing", missing), ("unexpected", unexpected)) if ids]
    return "; ".join(problems)
