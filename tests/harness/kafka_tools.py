"""Kafka's own view of a consumer group: `kafka-consumer-groups`, the tool an operator runs,
from the broker's jars (.stack/jars/kafka, fetched by scripts/setup), and the same offsets
through the AdminClient where a test needs only the numbers.

Usable without pytest; `bootstrap` defaults to the local stack's broker."""
from __future__ import annotations

import subprocess
from dataclasses import dataclass

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException
from confluent_kafka.admin import AdminClient

from tests.harness.kafka import default_bootstrap
from tests.harness.paths import REPO

KAFKA_JARS = REPO / ".stack" / "jars" / "kafka"
CONSUMER_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"  # kafka-consumer-groups.sh


@dataclass(frozen=True)
class GroupRow:
    """One partition's line of `kafka-consumer-groups --describe`; None where it prints '-'."""

    current_offset: int | None
    log_end_offset: int | None
    lag: int | None


def describe_group(group: str, *, bootstrap: str | None = None, timeout: float = 120.0,
                   ) -> tuple[str, dict[tuple[str, int], GroupRow]]:
    """Run `kafka-consumer-groups --bootstrap-server B --describe --group G`; its output (also
    printed, so that the test's log keeps it: pytest -s shows it), stdout then stderr (where it
    says that the group has no active members), and its rows by partition."""
    command = ["java", "-Xmx256m", "-cp", f"{KAFKA_JARS}/*", CONSUMER_GROUP_COMMAND,
               "--bootstrap-server", bootstrap or default_bootstrap(), "--describe", "--group", group]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    print(f"$ kafka-consumer-groups --bootstrap-server {bootstrap or default_bootstrap()} --describe --group {group}")
    print(done.stdout + done.stderr, flush=True)
    if done.returncode != 0:
        raise AssertionError(f"kafka-consumer-groups exited {done.returncode}:\n{done.stdout}{done.stderr}")
    return done.stdout + done.stderr, _rows(done.stdout, group)


def _rows(output: str, group: str) -> dict[tuple[str, int], GroupRow]:
    """The table under its header line GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG ..."""
    lines = output.splitlines()
    header = next((i for i, line in enumerate(lines) if line.split()[:3] == ["GROUP", "TOPIC", "PARTITION"]), None)
    if header is None:
        raise AssertionError(f"no table in the output of kafka-consumer-groups:\n{output}")
    columns = lines[header].split()
    rows = {}
    for line in lines[header + 1:]:
        fields = dict(zip(columns, line.split()))
        if fields.get("GROUP") != group:
            continue
        rows[(fields["TOPIC"], int(fields["PARTITION"]))] = GroupRow(
            *(None if fields[name] == "-" else int(fields[name])
              for name in ("CURRENT-OFFSET", "LOG-END-OFFSET", "LAG")))
    return rows


def group_offsets(group: str, *, bootstrap: str | None = None, timeout: float = 30.0) -> dict[tuple[str, int], int]:
    """The group's committed offsets, by partition (none: {}), as the AdminClient lists them."""
    admin = AdminClient({"bootstrap.servers": bootstrap or default_bootstrap()})
    futures = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=timeout)
    found = futures[group].result(timeout=timeout)
    return {(tp.topic, tp.partition): tp.offset for tp in found.topic_partitions if tp.offset >= 0}


def delete_groups(groups: list[str], *, bootstrap: str | None = None, timeout: float = 30.0) -> list[str]:
    """Delete the groups (a test's, at its end); returns why some could not be (never made)."""
    if not groups:
        return []
    admin = AdminClient({"bootstrap.servers": bootstrap or default_bootstrap()})
    problems = []
    for group, future in admin.delete_consumer_groups(groups, request_timeout=timeout).items():
        try:
            future.result(timeout=timeout)
        except KafkaException as exc:
            problems.append(f"{group}: {exc}")
    return problems
