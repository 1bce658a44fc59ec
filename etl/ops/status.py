"""`etl status`: where every partition stands, the last batch, and recorded skips."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from etl.config import Config
from etl.source.kafka import KafkaMetadata
from etl.sink.markers import marker_status, render_marker_status
from etl.state.store import ZkStateStore


@dataclass(frozen=True)
class PartitionStatus:
    topic: str
    partition: int
    committed: int | None
    earliest: int
    latest: int

    @property
    def lag(self) -> int:
        return self.latest - (self.earliest if self.committed is None else self.committed)


def collect_status(config: Config, store: ZkStateStore, kafka: KafkaMetadata) -> dict:
    partitions = kafka.partitions(config.kafka.topics)
    marks = kafka.watermarks(partitions)
    committed = store.committed_offsets()
    rows = [PartitionStatus(t, p, committed[(t, p)].value if (t, p) in committed else None, *marks[(t, p)])
            for t, p in partitions]
    last = store.last_batch()
    holder = store.lock_holder()
    return {
        "job": config.job.name,
        "partitions": [{**asdict(r), "lag": r.lag} for r in rows],
        "total_lag": sum(r.lag for r in rows),
        "last_batch": None if last is None else {**last[0].header_json(), "files": len(last[0].file_ranges)},
        "lock": None if holder is None else holder.describe(),
        "events": store.events(),
        "markers": marker_status(config.hive.success_markers, None if last is None else last[0]),
    }


def render_status(status: dict) -> str:
    lines = [f"job {status['job']}: total lag {status['total_lag']} records",
             f"lock: {status['lock'] or 'free'}", "",
             f"{'topic':<30} {'part':>4} {'committed':>12} {'latest':>12} {'lag':>10}"]
    for p in status["partitions"]:
        committed = "-" if p["committed"] is None else p["committed"]
        lines.append(f"{p['topic']:<30} {p['partition']:>4} {committed:>12} {p['latest']:>12} {p['lag']:>10}")
    last = status["last_batch"]
    lines.append("")
    if last is None:
        lines.append("last batch: none yet")
    else:
        lines.append(f"last batch: {last['batch_id']} {last['state']} (planned {last['planned_at']}, "
                     f"{last['files']} files, rows {_count(last['rows'])}, rejected {_count(last['rejected'])}, "
                     f"Hive partition {last['partition_values']})")
        if last.get("unmatched"):
            lines.append("  rows whose key found no match (columns left NULL): " +
                         ", ".join(f"{name} {count}" for name, count in sorted(last["unmatched"].items())))
        for change in last.get("dimension_changes") or []:
            lines.append(f"  dimension {change['dimension']} changed before the batch was resumed; finished with "
                         f"the current version (use_current) at {change['at']} by {change['by']}")
    for event in status["events"]:
        lines.append(f"event: {_describe_event(event)}")
    lines += render_marker_status(status["markers"])
    return "\n".join(lines)


def _count(value) -> str:
    return "-" if value is None else str(value)


def _describe_event(event: dict) -> str:
    if event.get("kind") == "skipped":
        return (f"batch {event['batch_id']} at {event['at']}: skipped {event['topic']}[{event['partition']}] "
                f"from committed {event['committed']} to {event['restart_at']} "
                f"(Kafka held [{event['low']}, {event['high']}])")
    if event.get("kind") == "reset":
        moves = ", ".join(f"{c['topic']}[{c['partition']}] {c['old']} -> {c['new']}" for c in event["changes"])
        aside = f"; {len(event['moved_aside'])} files moved out of the table" if event.get("moved_aside") else ""
        return f"offsets reset at {event['at']} by {event['user']}: {moves}{aside}"
    if event.get("kind") == "accepted_loss":
        return (f"{event['topic']}[{event['partition']}] offsets [{event['committed']}, {event['restart_at']}) "
                f"recorded as lost at {event['at']} by {event['user']} (etl recover --accept-loss)")
    if event.get("kind") == "moved_aside":
        return f"{len(event['moves'])} files moved out of the table at {event['at']} by {event['user']} ({event['by']})"
    return str(event)
