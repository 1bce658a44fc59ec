"""What the driver asks of Kafka: topics, partitions, watermarks, topic ids (reading one offset
range: etl.source.ranges).

Offsets live in ZooKeeper: these consumers never commit and have no reset policy, so a range
that is no longer in the log is an error, not a silent jump. (The committed offsets are mirrored
to a consumer group for Kafka's tools, never read back: etl.source.group_mirror.)
"""
from __future__ import annotations

import logging
import time

from confluent_kafka import Consumer, IsolationLevel, KafkaError, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from etl.config import KafkaConfig, RetryConfig
from etl.errors import KafkaReadError, KafkaUnavailable, TopicNotFound
from etl.model.identity import RecordFingerprint, fingerprint
from etl.retry import retry_idempotent
from etl.source.access import not_authorized, unrefused
from etl.source.client_log import ClientLog
from etl.source.topics import JobTopics, TopicRouting, matching_topics, missing_topic_todo

log = logging.getLogger(__name__)

RETRYABLE_KAFKA_CODES = frozenset({
    KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN,
    KafkaError.REQUEST_TIMED_OUT, KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.NETWORK_EXCEPTION,
})
NO_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"  # the all-zero UUID a broker without topic ids reports
# librdkafka stops fetching a partition while queued.min.messages (100,000) of its messages wait
# in the consumer's queue, and looks again only after fetch.queue.backoff.ms: 1 s by default. A
# task empties that queue in a fraction of a second, then waited out the rest of it, about 1 s of
# every 250,000-record range. Looking again after 10 ms costs no measurable CPU, and memory stays
# bounded by the same queue thresholds. A [kafka] setting of the same key wins.
READ_TUNING = {"fetch.queue.backoff.ms": "10"}


def consumer_settings(config: KafkaConfig, group: str) -> dict:
    return {
        **READ_TUNING,
        **config.client,
        "group.id": group,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "error",
        "enable.partition.eof": True,
    }


def consumer_isolation(config: KafkaConfig) -> IsolationLevel:
    """The isolation level the job's consumer reads with ([kafka] isolation.level, librdkafka's
    default read_committed)."""
    if config.client.get("isolation.level", "read_committed") == "read_uncommitted":
        return IsolationLevel.READ_UNCOMMITTED
    return IsolationLevel.READ_COMMITTED


class KafkaMetadata:
    """Driver-side questions: which partitions exist and what offsets they hold."""

    def __init__(self, config: KafkaConfig, retry: RetryConfig, job_name: str, routing: TopicRouting | None = None):
        """`routing`: with [route] sections, what gives each chosen topic its tables."""
        self.config, self.retry, self.routing = config, retry, routing
        self.client_log = ClientLog()  # librdkafka's lines, summarised in the error when Kafka fails
        self.admin = AdminClient({**config.admin_client, **self.client_log.settings()})
        self.consumer = Consumer({**consumer_settings(config, f"etl-{job_name}-planner"), **self.client_log.settings()})
        self.client_log.heard_from(self.admin, self.consumer)

    def close(self) -> None:
        self.consumer.close()

    def job_topics(self) -> JobTopics:
        """The topics the job reads now: [kafka] topics as listed, or the broker's topics that
        topics_regex matches (etl.source.topics), less those no route can give a table. Every
        command asks here, so all agree."""
        topics = self._chosen_topics()
        if self.routing is None:
            return topics
        routed = self.routing.apply(topics)
        for topic in routed.unroutable:
            log.warning("not loaded: %s", topic.describe())
        return routed

    def _chosen_topics(self) -> JobTopics:
        pattern = self.config.topics_regex
        if pattern is None:
            return JobTopics(self.config.topics)
        topics = matching_topics(pattern, self.topics_on_broker())
        if topics.hidden:
            log.warning("[kafka] topics_regex %r matches %s, which the job never loads: files named after them "
                        "would start with '_' or '.', and Hive and Spark skip such files", pattern.pattern,
                        ", ".join(topics.hidden))
        if topics.internal:
            log.warning("[kafka] topics_regex %r matches %s, Kafka's internal topics, which the job never loads",
                        pattern.pattern, ", ".join(topics.internal))
        if not topics.loaded:
            log.warning("[kafka] topics_regex %r matches no topic on %s", pattern.pattern,
                        self.config.client["bootstrap.servers"])
        return topics

    def topics_on_broker(self) -> frozenset[str]:
        """Every topic's name, in one metadata request (the consumer's: it never creates a topic)."""
        return self._retry(self._list_topics, "list topics")

    def _list_topics(self) -> frozenset[str]:
        try:
            return frozenset(self.consumer.list_topics(timeout=self.config.metadata_timeout_seconds).topics)
        except KafkaException as exc:
            raise _as_unavailable(exc, "list topics") from exc

    def partitions(self, topics: tuple[str, ...]) -> list[tuple[str, int]]:
        return [tp for topic in topics for tp in self._retry(lambda t=topic: self._partitions(t), "list partitions")]

    def _partitions(self, topic: str) -> list[tuple[str, int]]:
        try:
            metadata = self.consumer.list_topics(topic, timeout=self.config.metadata_timeout_seconds)
        except KafkaException as exc:
            raise _as_unavailable(exc, f"list partitions of {topic}") from exc
        found = metadata.topics.get(topic)
        if found is not None and found.error is not None \
                and found.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
            raise not_authorized(self.config.client, "DESCRIBE", "topic", topic, grant=("DESCRIBE", "READ"),
                                 note=" (Kafka answers so for a topic that does not exist, too)")
        if found is None or found.error is not None and found.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART \
                or found is not None and not found.partitions:
            todo = missing_topic_todo(self.config, self.routing.routes if self.routing else None, topic)
            raise TopicNotFound(f"topic {topic!r} does not exist on {self.config.client['bootstrap.servers']}; "
                                f"{todo}")
        if found.error is not None:
            raise KafkaUnavailable(f"metadata for topic {topic!r}: {found.error}")
        return [(topic, p) for p in sorted(found.partitions)]

    def watermarks(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, int]]:
        """(earliest, latest) for every partition, asked in two batched requests.

        `latest` is what the job's consumer can read to: under isolation.level = read_committed
        (librdkafka's default) the last stable offset, i.e. the first offset of the oldest
        transaction still open, which the consumer cannot read past until it ends; under
        read_uncommitted the high watermark. A range planned past the last stable offset would
        wait at it for fetch_timeout_seconds and fail."""
        if not partitions:
            return {}
        low = self._retry(lambda: self._list_offsets(partitions, OffsetSpec.earliest()), "list earliest offsets")
        high = self._retry(lambda: self._list_offsets(partitions, OffsetSpec.latest()), "list latest offsets")
        return {tp: (low[tp], high[tp]) for tp in partitions}

    def log_ends(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Each partition's high watermark, where its log ends, whatever the isolation level (under
        read_committed `watermarks` gives the last stable offset, which an open transaction holds
        back). One batched request, asked only where a committed offset is past `latest`."""
        if not partitions:
            return {}
        return self._retry(lambda: self._list_offsets(partitions, OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED),
                           "list log end offsets")

    def _list_offsets(self, partitions, spec, isolation: IsolationLevel | None = None) -> dict[tuple[str, int], int]:
        request = {TopicPartition(t, p): spec for t, p in partitions}
        futures = self.admin.list_offsets(request, isolation_level=isolation or consumer_isolation(self.config),
                                          request_timeout=self.config.metadata_timeout_seconds)
        try:
            return {(tp.topic, tp.partition): f.result().offset for tp, f in futures.items()}
        except KafkaException as exc:
            if _code(exc) == KafkaError._UNKNOWN_PARTITION:
                raise self._stale_partitions(partitions, exc) from exc
            raise _as_unavailable(exc, "list offsets") from exc

    def _stale_partitions(self, partitions, exc: KafkaException) -> Exception:
        """The admin client's metadata lags partitions added since it last looked (librdkafka
        refreshes it every topic.metadata.refresh.interval.ms, 5 minutes), while the consumer's
        listed them: refresh it, and the retry (bounded) asks again; a last failure is transient."""
        for topic in sorted({t for t, _ in partitions}):
            try:
                self.admin.list_topics(topic, timeout=self.config.metadata_timeout_seconds)
            except KafkaException as refresh:
                return _as_unavailable(refresh, f"refresh the metadata of {topic}")
        return KafkaUnavailable(f"Kafka's metadata does not list every partition of "
                                f"{', '.join(sorted({t for t, _ in partitions}))} yet ({exc.args[0]}): partitions were "
                                f"added; the next run finds them")

    def offsets_at(self, partitions: list[tuple[str, int]], at_ms: int) -> dict[tuple[str, int], int | None]:
        """Each partition's first offset whose record's timestamp is at or after `at_ms` (Kafka's
        ListOffsets by time, asked by the consumer: its isolation level); None where it holds none."""
        if not partitions:
            return {}
        return self._retry(lambda: self._offsets_for_times(partitions, at_ms), "find offsets by time")

    def _offsets_for_times(self, partitions, at_ms: int) -> dict[tuple[str, int], int | None]:
        request = [TopicPartition(t, p, at_ms) for t, p in partitions]
        try:
            found = self.consumer.offsets_for_times(request, timeout=self.config.metadata_timeout_seconds)
            refused = [tp for tp in found if tp.error is not None]
            if refused:
                raise KafkaException(refused[0].error)
        except KafkaException as exc:
            raise _as_unavailable(exc, "find offsets by time") from exc
        return {(tp.topic, tp.partition): tp.offset if tp.offset >= 0 else None for tp in found}

    def topic_ids(self, topics) -> dict[str, str | None]:
        """Each topic's id, or None where the broker reports none (before Kafka 2.8)."""
        if not topics:
            return {}
        futures = self.admin.describe_topics(TopicCollection(sorted(topics)),
                                             request_timeout=self.config.metadata_timeout_seconds)
        ids = {}
        for topic, future in futures.items():
            try:
                topic_id = future.result().topic_id
            except KafkaException as exc:
                log.info("topic %s: the broker reports no topic id (%s); identity rests on record fingerprints",
                         topic, exc)
                topic_id = None
            ids[topic] = None if topic_id is None or str(topic_id) == NO_TOPIC_ID else str(topic_id)
        return ids

    def records_at(self, wanted: dict[tuple[str, int], int]) -> dict[tuple[str, int], RecordFingerprint | None]:
        """The fingerprint of the record each partition holds at the given offset (or of the
        next one, when that offset was compacted away); None where the log holds none."""
        found: dict[tuple[str, int], RecordFingerprint | None] = {}
        if not wanted:
            return found
        self.consumer.assign([TopicPartition(t, p, offset) for (t, p), offset in wanted.items()])
        try:
            deadline = time.monotonic() + self.config.fetch_timeout_seconds
            while len(found) < len(wanted) and time.monotonic() < deadline:
                for message in self.consumer.consume(num_messages=len(wanted), timeout=1.0):
                    key = (message.topic(), message.partition())
                    if key in found or key not in wanted:
                        continue
                    if message.error() is None:
                        found[key] = fingerprint(message.offset(), message.timestamp()[1], message.value())
                    elif message.error().code() == KafkaError._PARTITION_EOF:
                        found[key] = None
        finally:
            self.consumer.unassign()
        missing = sorted(set(wanted) - set(found))
        if missing:
            raise KafkaUnavailable(f"Kafka served no record at the last committed offset of {missing[:5]} within "
                                   f"{self.config.fetch_timeout_seconds}s; is the broker up?")
        return found

    def _retry(self, fn, what: str):
        try:
            return retry_idempotent(self.retry, (KafkaUnavailable,), f"Kafka {what}",
                                    lambda: unrefused(fn, self.client_log, self.config.client))
        except KafkaUnavailable as exc:
            heard = self.client_log.summary()
            if heard:
                raise KafkaUnavailable(f"{exc} (librdkafka: {heard})") from exc
            raise


def _code(exc: KafkaException) -> int | None:
    error = exc.args[0] if exc.args else None
    return error.code() if isinstance(error, KafkaError) else None


def _as_unavailable(exc: KafkaException, what: str) -> Exception:
    error = exc.args[0] if exc.args else None
    code = _code(exc)
    if code in RETRYABLE_KAFKA_CODES:
        return KafkaUnavailable(f"Kafka did not answer to {what}: {error}; check [kafka] bootstrap.servers "
                                f"and that the brokers are up")
    return KafkaReadError(f"Kafka refused to {what}: {error}")
