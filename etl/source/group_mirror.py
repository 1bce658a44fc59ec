"""The committed offsets, mirrored to a Kafka consumer group for Kafka's own tools.

ZooKeeper holds the job's offsets (etl.state). After every transaction that moves them (a
batch's commit, a reset), the same offsets are committed to the consumer group [kafka]
consumer_group (etl-<job name> by default), so that `kafka-consumer-groups --describe` and lag
monitors that read consumer groups (Burrow, Kafka's JMX, Cruise Control) see the job's position
and lag. It is only a mirror: nothing reads it back, and a commit that fails is a WARNING,
never a failed command; the next commit of those partitions, or the next run, corrects it. One
thing fails a run: a group the broker's ACLs refuse the job, found at the run's start, before
anything is loaded (`access_check`), since no later run would mirror to it either.

The consumer commits as a standalone consumer: it never subscribes nor joins the group. Kafka
accepts such a commit while the group has no members, which it never has unless something else
uses its name (then the broker refuses, UNKNOWN_MEMBER_ID, and the warning says so).
"""
from __future__ import annotations

import concurrent.futures
import logging
from typing import Callable, Mapping, Sequence

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from etl.config import KafkaConfig
from etl.source.access import not_authorized
from etl.source.client_log import ClientLog
from etl.source.kafka import consumer_settings

log = logging.getLogger(__name__)
# How long a run's start waits for the broker to say whether the job may use its group (access_check).
GROUP_CHECK_SECONDS = 1.0


class OffsetMirror:
    """Commits offsets to the job's consumer group; built once by each command that mirrors
    (run, reset-offsets, recover), and closed by whoever built it. A config without a group mirrors nothing."""

    def __init__(self, config: KafkaConfig, on_failure: Callable[[], None] = lambda: None):
        self.config, self.group, self.on_failure = config, config.consumer_group, on_failure
        self.consumer: Consumer | None = None  # made at the first commit (see _client)
        self.client_log = ClientLog()  # librdkafka's lines, summarised in the warning of a failed commit

    def _client(self, group: str) -> Consumer:
        """The consumer, made when first needed: a client made up front connects at once, and a
        command that fails before any commit (ZooKeeper down) would print its connection errors."""
        if self.consumer is None:
            self.consumer = Consumer({**mirror_settings(self.config, group), **self.client_log.settings()})
            self.client_log.heard_from(self.consumer)
        return self.consumer

    def access_check(self, admin: AdminClient, topics: Sequence[str]) -> Callable[[], None]:
        """Ask, at a run's start, whether the broker lets the job's principal use its group: the
        answer comes while the run goes on setting up, and the callable returned raises
        KafkaNotAuthorized should the group's ACLs refuse it, before anything is loaded (a commit
        so refused only waits out its coordinator, _WAIT_COORD, as a WARNING after the batch).
        The question (describing the group) needs DESCRIBE on it, which READ, what a commit
        needs, includes. An answer later than GROUP_CHECK_SECONDS (a coordinator still being
        elected, a broker away) is not waited for: that is left to the commits' WARNING."""
        if self.group is None or not topics:
            return lambda: None
        group = self.group
        # DescribeGroups, not OffsetFetch: librdkafka's admin ListConsumerGroupOffsets crashes the
        # process when the coordinator answers NOT_COORDINATOR, as a fresh broker's does
        # (librdkafka #5040; seen here as a SIGSEGV of `etl run`).
        answer = admin.describe_consumer_groups([group], request_timeout=self.config.metadata_timeout_seconds)[group]

        def check() -> None:
            try:
                answer.result(timeout=GROUP_CHECK_SECONDS)
            except concurrent.futures.TimeoutError:
                log.debug("Kafka did not say within %.1f s whether the job may use the group %s", GROUP_CHECK_SECONDS,
                          group)
            except KafkaException as exc:
                if exc.args and isinstance(exc.args[0], KafkaError) and \
                        exc.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                    raise not_authorized(self.config.client, "READ", "consumer group", group,
                                         remedy="; or set [kafka] consumer_group to a group it may use, or "
                                                "commit_to_consumer_group = false to mirror to none") from exc
                log.debug("could not ask Kafka about the consumer group %s: %s", group, exc)
        return check

    def commit(self, offsets: Mapping[tuple[str, int], int]) -> bool:
        """Commit each partition's next offset to read (as ZooKeeper holds it); False, having
        logged a WARNING, when Kafka refused or did not answer."""
        if self.group is None or not offsets:
            return True
        request = [TopicPartition(topic, partition, offset) for (topic, partition), offset in sorted(offsets.items())]
        try:
            refused = [tp for tp in self._client(self.group).commit(offsets=request, asynchronous=False) or ()
                       if tp.error]
            if refused:  # librdkafka raises for these too; should one come back instead, it is the same failure
                raise KafkaException(refused[0].error)
        except KafkaException as exc:
            log.warning("the committed offsets of %d partitions were not mirrored to the Kafka consumer group %s: "
                        "%s. ZooKeeper holds them (this is only a mirror for Kafka's tools); the group shows older "
                        "offsets until the next commit%s%s", len(request), self.group, exc.args[0], _remedy(exc),
                        _heard(self.client_log.summary()))
            self.on_failure()
            return False
        log.debug("mirrored the offsets of %d partitions to the Kafka consumer group %s", len(request), self.group)
        return True

    def close(self) -> None:
        if self.consumer is not None:
            self.consumer.close()


def mirror_settings(config: KafkaConfig, group: str) -> dict:
    """A consumer of the job's settings in the mirror's group. It never joins the group, so
    the session timeout serves only to bound how long a commit waits for the group's
    coordinator (librdkafka's default, 45 s, would hold a run that long when Kafka is away)."""
    timeout_ms = max(1000, int(config.metadata_timeout_seconds * 1000))
    return {**consumer_settings(config, group), "session.timeout.ms": timeout_ms,
            "heartbeat.interval.ms": min(timeout_ms // 3, 3000)}


def _heard(summary: str) -> str:
    return f" (librdkafka: {summary})" if summary else ""


def _remedy(exc: KafkaException) -> str:
    error = exc.args[0] if exc.args else None
    code = error.code() if isinstance(error, KafkaError) else None
    if code in (KafkaError.UNKNOWN_MEMBER_ID, KafkaError.ILLEGAL_GENERATION, KafkaError.REBALANCE_IN_PROGRESS):
        return ("; the group has members: another consumer uses its name. Set [kafka] consumer_group to a name of "
                "the job's own")
    if code in (KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError.TOPIC_AUTHORIZATION_FAILED):
        return ("; the job's principal may not commit to this group: grant it READ on the group, or set [kafka] "
                "commit_to_consumer_group = false")
    return ""
