"""`etl reset-offsets`: an operator moves committed offsets on purpose, on the record.

Refused while a run holds the lock or a batch is open (the open plan would no longer match
the offsets). Every reset is stored in ZooKeeper as an event with time, user, old and new
offsets; `etl status` lists them and `etl verify` accepts the gaps they explain.
"""
from __future__ import annotations

import getpass
import re

from etl.batch import utc_now_iso
from etl.config import Config
from etl.errors import EXIT_BATCH_FAILED, EXIT_OK, EXIT_USAGE, ConfigError
from etl.kafka_source import KafkaMetadata
from etl.zk_store import ZkStateStore

_EXPLICIT = re.compile(r"^(?P<topic>[A-Za-z0-9._-]+):(?P<partition>\d+)=(?P<offset>\d+)$")


def parse_targets(to: list[str]) -> str | dict[tuple[str, int], int]:
    if to in (["earliest"], ["latest"]):
        return to[0]
    targets = {}
    for item in to:
        match = _EXPLICIT.match(item)
        if not match:
            raise ConfigError(f"--to {item!r}: use earliest, latest, or TOPIC:PARTITION=OFFSET (repeatable)")
        targets[(match["topic"], int(match["partition"]))] = int(match["offset"])
    return targets


def plan_changes(config: Config, store: ZkStateStore, kafka: KafkaMetadata, targets) -> list[dict]:
    partitions = kafka.partitions(config.kafka.topics)
    marks = kafka.watermarks(partitions)
    committed = store.committed_offsets()
    wanted = targets if isinstance(targets, dict) else {
        tp: marks[tp][0 if targets == "earliest" else 1] for tp in partitions}
    changes = []
    for (topic, partition), new in sorted(wanted.items()):
        if (topic, partition) not in marks:
            raise ConfigError(f"{topic}[{partition}] is not a partition of the configured topics "
                              f"{', '.join(config.kafka.topics)}")
        low, high = marks[(topic, partition)]
        if not low <= new <= high:
            raise ConfigError(f"{topic}[{partition}]: offset {new} is outside what Kafka holds, [{low}, {high}]")
        old = committed.get((topic, partition))
        changes.append({"topic": topic, "partition": partition, "old": old.value if old else None, "new": new})
    return changes


def reset_offsets(config: Config, to: list[str], yes: bool, out=print) -> int:
    targets = parse_targets(to)
    with ZkStateStore(config.zookeeper, config.job.name, config.retry) as store:
        holder = store.acquire_lock()
        if holder is not None:
            out(f"refused: a run holds the job lock ({holder.describe()}); try again when it has finished")
            return EXIT_BATCH_FAILED
        try:
            return _reset_locked(config, store, targets, yes, out)
        finally:
            store.release_lock()


def _reset_locked(config, store, targets, yes, out) -> int:
    opened = store.open_batch()
    if opened:
        out(f"refused: batch {opened[0].batch_id} is open ({opened[0].state.value}); run `etl recover` first")
        return EXIT_BATCH_FAILED
    kafka = KafkaMetadata(config.kafka, config.retry, config.job.name)
    try:
        changes = plan_changes(config, store, kafka, targets)
    finally:
        kafka.close()
    for c in changes:
        backwards = c["old"] is not None and c["new"] < c["old"]
        note = "  (BACKWARDS: offsets already loaded will be loaded again; move their files out first)" \
            if backwards else ""
        out(f"{c['topic']}[{c['partition']}]: {c['old']} -> {c['new']}{note}")
    if not yes:
        out("nothing changed: pass --yes to apply")
        return EXIT_USAGE
    store.reset_offsets(changes, {"kind": "reset", "at": utc_now_iso(), "user": getpass.getuser(),
                                  "changes": changes})
    out(f"reset {len(changes)} offsets; recorded in ZooKeeper")
    return EXIT_OK
