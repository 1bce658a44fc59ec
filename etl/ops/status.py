"""`etl status`: where every partition stands, the last batch, recorded skips, and the topics the
job knows of but does not load (etl.source.topics).

A topic with committed offsets that the routes can no longer load (two routes now choose it, its
templated name clashes: etl.model.routes) stops every `etl run` (exit 2, etl.job.batch_tables):
its partitions count in the lag as the loaded ones do, and it is named first (`not_loadable`);
`--max-lag` lists them whatever their lag, `etl check` says UNKNOWN, and the run's metrics count
them (`etl_unloadable_topics`), so that none of them reads as fine."""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Mapping

from etl.config import Config, RetryConfig
from etl.job.summary import written_files
from etl.model.events import from_json as parse_event, to_json as event_json
from etl.model.routes import Unroutable
from etl.sink.markers import MARKER_NAME, marker_status
from etl.source.kafka import KafkaMetadata
from etl.source.topics import JobTopics, not_loaded_topics
from etl.state.protocols import StateStore


def asked_once(config: Config) -> RetryConfig:
    """`etl status` and `etl check` ask each service once, so that they answer within its
    configured timeout ([kafka] metadata_timeout_seconds) and the asker decides when to ask again."""
    return replace(config.retry, attempts=1)


@dataclass(frozen=True)
class PartitionStatus:
    topic: str
    partition: int
    committed: int | None
    earliest: int
    latest: int  # what the job reads to: the last stable offset under read_committed
    log_end: int | None = None  # the high watermark, asked where committed > latest

    @property
    def waiting(self) -> bool:
        """Committed past the last stable offset, within the log: the job waits for a transaction
        still open (etl.model.planner), and its lag is what the log holds past the committed offset."""
        return (self.committed is not None and self.log_end is not None
                and self.latest < self.committed <= self.log_end)

    @property
    def lag(self) -> int:
        """Never negative: a partition waiting on an open transaction lags by what the log holds past it."""
        start = self.earliest if self.committed is None else self.committed
        end = self.log_end if self.waiting and self.log_end is not None else self.latest
        return max(0, end - start)


def partition_statuses(kafka: KafkaMetadata, partitions: list[tuple[str, int]],
                       committed: dict[tuple[str, int], int]) -> list[PartitionStatus]:
    """Each partition where it stands, the log end asked only where the committed offset is past `latest`."""
    marks = kafka.watermarks(partitions)
    past = [tp for tp in partitions if committed.get(tp, -1) > marks[tp][1]]
    ends = kafka.log_ends(past) if past else {}
    return [PartitionStatus(t, p, committed.get((t, p)), *marks[(t, p)], ends.get((t, p))) for t, p in partitions]


@dataclass(frozen=True)
class JobLag:
    """The partitions whose lag counts: the loaded topics', then those of `not_loadable`, the
    topics with committed offsets that the routes can no longer load."""

    topics: JobTopics
    partitions: list[PartitionStatus]
    not_loadable: tuple[Unroutable, ...] = ()


def read_job_lag(kafka: KafkaMetadata, committed: Mapping[tuple[str, int], int]) -> JobLag:
    """`committed`: every partition's committed offset, as ZooKeeper keeps them."""
    topics = kafka.job_topics()
    with_offsets = {topic for topic, _ in committed}
    stuck = tuple(u for u in topics.unroutable if u.topic in with_offsets)
    partitions = kafka.partitions(tuple(dict.fromkeys([*topics.loaded, *(u.topic for u in stuck)])))
    return JobLag(topics, partition_statuses(kafka, partitions, dict(committed)), stuck)


def collect_status(config: Config, store: StateStore, kafka: KafkaMetadata) -> dict:
    committed = {tp: c.value for tp, c in store.offsets.committed_offsets().items()}
    lag = read_job_lag(kafka, committed)
    topics, rows = lag.topics, lag.partitions
    not_loaded = not_loaded_topics(topics, committed, kafka.topics_on_broker())
    last = store.batches.last_batch()
    holder = store.session.lock_holder()
    return {
        "job": config.job.name,
        "partitions": [{**asdict(r), "lag": r.lag, "waiting": r.waiting} for r in rows],
        "total_lag": sum(r.lag for r in rows),
        "not_loadable": [{"topic": u.topic, "why": u.why} for u in lag.not_loadable],
        "topics_not_loaded": [topic.to_json(config.topics_chooser) for topic in not_loaded],
        **({"tables": {t: list(routed.tables) for t, routed in topics.tables.topics.items()}} if topics.tables else {}),
        "last_batch": None if last is None else {**last[0].header_json(), "files": written_files(last[0]),
                                                 "partitions": last[0].event_time.partitions_json()},
        "lock": None if holder is None else holder.describe(),
        "events": [event_json(event) for event in store.operator.events()],
        "markers": marker_status(config.hive.success_markers, None if last is None else last[0]),
        "compactions": [plan.describe() for plan, _ in store.compactions.open_compactions()],
        "compacted_partitions": store.compactions.relocations().counts(),
    }


def render_status(status: dict) -> str:
    lines = [f"job {status['job']}: total lag {status['total_lag']} records",
             *[f"CANNOT LOAD topic {u['topic']} (it has committed offsets): {u['why']}; every `etl run` refuses it "
               f"(exit 2) until the routes are mended" for u in status.get("not_loadable", ())],
             f"lock: {status['lock'] or 'free'}", "",
             f"{'topic':<30} {'part':>4} {'committed':>12} {'latest':>12} {'lag':>10}"]
    for p in status["partitions"]:
        committed = "-" if p["committed"] is None else p["committed"]
        lines.append(f"{p['topic']:<30} {p['partition']:>4} {committed:>12} {p['latest']:>12} {p['lag']:>10}"
                     + ("  waiting: a transaction open at 'latest'" if p.get("waiting") else ""))
    lines += [f"topic {topic} -> table {', '.join(tables)}" for topic, tables in status.get("tables", {}).items()]
    lines += [f"topic not loaded: {topic['detail']}" for topic in status["topics_not_loaded"]]
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
        lines += _touched(last.get("partitions"))
        for change in last.get("dimension_changes") or []:
            lines.append(f"  dimension {change['dimension']} changed before the batch was resumed; finished with "
                         f"the current version (use_current) at {change['at']} by {change['by']}")
    for event in status["events"]:
        lines.append(f"event: {parse_event(event).describe()}")
    lines += render_marker_status(status["markers"])
    compacted = status["compacted_partitions"]
    tables = compacted.get("tables", {})
    if compacted["main"] or compacted["rejected"] or tables or status["compactions"]:
        of_tables = "".join(f"{count} of {name}, " for name, count in tables.items())
        lines.append(f"compacted partitions: {of_tables or str(compacted['main']) + ' of the table, '}"
                     f"{compacted['rejected']} of the rejected table")
    lines += [f"under way: {described}" for described in status["compactions"]]
    return "\n".join(lines)


def _touched(partitions: list[dict] | None) -> list[str]:
    """By event time: the Hive partitions the last batch wrote into, and its late rows."""
    if not partitions:
        return []
    shown = ", ".join(f"{p['partition']} ({p['rows']})" for p in partitions[:5])
    lines = [f"  by event time into {len(partitions)} Hive partitions: {shown}"
             + (f" and {len(partitions) - 5} more" if len(partitions) > 5 else "")]
    late = [p for p in partitions if p["late"]]
    if late:
        lines.append(f"  LATE DATA: {sum(p['late'] for p in late)} rows in partitions already due their "
                     f"{MARKER_NAME}: " + ", ".join(f"{p['partition']} ({p['late']})" for p in late[:5]))
    return lines


def _count(value) -> str:
    return "-" if value is None else str(value)


def render_marker_status(status: dict) -> list[str]:
    if not status["enabled"] and not status["late_count"]:
        return []
    awaiting = status["awaiting"]
    listed = ", ".join(awaiting[:5]) + (f" and {len(awaiting) - 5} more" if len(awaiting) > 5 else "")
    lines = [f"success markers: {'on' if status['enabled'] else 'off'} (delay {status['delay_seconds']:g}s); "
             f"partitions awaiting {MARKER_NAME}: {len(awaiting)}" + (f" ({listed})" if awaiting else "")]
    if status["late_count"]:
        last = status["late"][-1]
        where = f"{last['table']}/{last['partition']}" if last.get("table") else last["partition"]  # a routed job's
        lines.append(f"LATE DATA: batches written into a partition that already had its {MARKER_NAME}: "
                     f"{status['late_count']}; the last: batch {last['batch_id']} into {where}, "
                     f"planned {last['planned_at']} by {last['planned_by']}")
    return lines


def over_max_lag(status: dict, max_lag: int) -> list[dict]:
    """`etl status --max-lag N`: the partitions whose lag is above N, and those of a topic the
    routes can no longer load, whatever their lag: no run loads them (the CLI then exits 3)."""
    stuck = {u["topic"] for u in status.get("not_loadable", ())}
    return [{"topic": p["topic"], "partition": p["partition"], "lag": p["lag"],
             **({"not_loadable": True} if p["topic"] in stuck else {})}
            for p in status["partitions"] if p["lag"] > max_lag or p["topic"] in stuck]


def render_over_max_lag(over: list[dict], max_lag: int) -> str:
    if not over:
        return f"lag: every partition is at or below --max-lag {max_lag}"
    shown = ", ".join(f"{p['topic']}[{p['partition']}] "
                      f"({p['lag']}{', cannot be loaded' if p.get('not_loadable') else ''})"
                      for p in over[:10])
    return (f"LAG ABOVE --max-lag {max_lag} in {len(over)} partitions: {shown}"
            + (f" and {len(over) - 10} more" if len(over) > 10 else ""))
