"""The [kafka] section: the ETL's own keys, the librdkafka keys it owns or keeps secret, and
the librdkafka probe that judges every other key at start-up."""
from __future__ import annotations

import logging
import os
import re
from typing import Mapping

from etl.config.keys import SectionKind, names_in
from etl.config.model import KafkaConfig
from etl.config.section import Section, did_you_mean, read_secret_files
from etl.config.topic_pattern import TopicPattern
from etl.errors import ConfigError

TOPIC_RE = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
# Kafka takes any string as a group id; one a shell, a log line or an ACL could misread is refused.
GROUP_RE = re.compile(r"^[!-~]{1,249}$")
HIDDEN_FILE_PREFIXES = ("_", ".")
# Settings the ETL owns; a pass-through value for them would break offset control.
KAFKA_RESERVED = ("enable.auto.commit", "group.id", "auto.offset.reset", "enable.partition.eof")
# librdkafka settings that are secrets. Each may be read instead from the file named by
# `<key>_file`, an ETL key (librdkafka has no such keys), so that the INI need not hold it.
KAFKA_SECRET_KEYS = ("sasl.password", "ssl.key.password", "ssl.keystore.password", "sasl.oauthbearer.client.secret")
# The keys the ETL reads itself and does not hand to librdkafka: the table's, but bootstrap.servers.
KAFKA_OWN_KEYS = tuple(name for name in names_in(SectionKind.KAFKA) if name != "bootstrap.servers")


class KafkaSettings(dict):
    """librdkafka settings, as librdkafka takes them. The repr masks the secrets, because the
    config travels inside every Spark task and may end up in a log line or a traceback."""

    def __repr__(self) -> str:
        return repr({key: "***" if key in KAFKA_SECRET_KEYS else value for key, value in self.items()})


def kafka_section(s: Section, job_name: str, routed: bool = False) -> KafkaConfig:
    """`routed`: the config has [route] sections, which choose the topics (etl.config.routes);
    the job's topics are then theirs, filled in by etl.config.parse."""
    client = KafkaSettings({k: v for k, v in s.values.items() if k not in KAFKA_OWN_KEYS})
    if "bootstrap.servers" not in client:
        raise s.fail("bootstrap.servers", "is required")
    for key in KAFKA_RESERVED:
        if key in client:
            raise s.fail(key, "is set by the ETL itself (offsets live in ZooKeeper); remove it"
                              + ("; consumer_group names the group they are mirrored to" if key == "group.id" else ""))
    read_secret_files(s, client, KAFKA_SECRET_KEYS)
    _check_with_librdkafka(s, client)
    topics, topics_regex = _routed_topics(s) if routed else topic_choice(s)
    return KafkaConfig(
        topics=topics,
        client=client,
        admin_client=KafkaSettings({key: value for key, value in client.items() if not _consumer_only(key, value)}),
        fetch_timeout_seconds=s.positive("fetch_timeout_seconds"),
        metadata_timeout_seconds=s.positive("metadata_timeout_seconds"),
        topics_regex=topics_regex,
        consumer_group=_consumer_group(s, job_name),
    )


def _consumer_group(s: Section, job_name: str) -> str | None:
    """The group the committed offsets are mirrored to: etl-<job name>, another name, or none."""
    group = s.get("consumer_group", None, _group_id)  # derived below
    if s.get("commit_to_consumer_group"):
        return group or f"etl-{job_name}"
    if group is not None:
        raise s.fail("consumer_group", "is set, but commit_to_consumer_group = false commits to no group; "
                                       "remove one of them")
    return None


def _group_id(raw: str) -> str:
    if not GROUP_RE.match(raw):
        raise ValueError("a consumer group id here is 1 to 249 printable ASCII characters, without spaces")
    return raw


def _routed_topics(s: Section) -> tuple[tuple[str, ...], None]:
    for key in ("topics", "topics_regex"):
        if s.is_set(key):
            raise s.fail(key, "each [route] chooses its topics; move the topics into the route sections")
    return (), None


def topic_choice(s: Section) -> tuple[tuple[str, ...], TopicPattern | None]:
    """Exactly one of topics (a fixed list) and topics_regex (matched anew at every plan)."""
    topics = s.get("topics", (), _topics)
    topics_regex = s.get("topics_regex", convert=_topics_regex)
    if topics and topics_regex is not None:
        raise s.fail("topics_regex", "set either topics (a list) or topics_regex (a pattern), not both")
    if not topics and topics_regex is None:
        raise s.fail("topics", "is required: list the topics, separated by commas, or set topics_regex to a "
                               "regular expression (RE2 syntax) that the topics' names match")
    return topics, topics_regex


def _topics_regex(raw: str) -> TopicPattern:
    return TopicPattern(raw)  # matched in linear time (etl.config.topic_pattern)


def _topics(raw: str) -> tuple[str, ...]:
    topics = tuple(t.strip() for t in raw.split(",") if t.strip())
    for topic in topics:
        if not TOPIC_RE.match(topic):
            raise ValueError(f"{topic!r} is not a valid Kafka topic name")
        if topic[0] in HIDDEN_FILE_PREFIXES:
            raise ValueError(f"topic {topic!r} starts with {topic[0]!r}: its files are named after it, and Hive "
                             f"and Spark skip files whose names start with '_' or '.', so its rows would never "
                             f"be seen; this ETL cannot load such a topic")
    if not topics:
        raise ValueError("names no topic; list one or more, separated by commas")
    if len(set(topics)) != len(topics):
        raise ValueError("a topic is listed twice")
    return topics


def _check_with_librdkafka(s: Section, client: Mapping[str, str]) -> None:
    """Let librdkafka judge its own settings at start-up, so that a typo or a bad value exits 2
    naming the key. It alone knows its hundreds of keys and their ranges, and building a client
    is the way to ask it; without bootstrap.servers that client never connects anywhere."""
    from confluent_kafka import Consumer, KafkaException
    settings = {key: value for key, value in client.items() if key != "bootstrap.servers"}
    try:
        Consumer({**settings, "group.id": "etl-config-check", "log_level": 0}).close()
    except KafkaException as exc:
        raise _librdkafka_refused(s, client, exc.args[0].str()) from exc


def _consumer_only(key: str, value: str) -> bool:
    """Whether librdkafka calls `key` a consumer property, which a producer-type handle such as
    the driver's AdminClient ignores with a warning (CONFWARN) on stderr at every run. librdkafka
    alone knows which keys those are, aliases included, so a client of that key alone is built
    (about a millisecond, connecting nowhere) and what it logs is heard. A key that cannot stand
    alone is kept: the consumer check above already accepted it with the others."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient
    if key == "bootstrap.servers":
        return False
    heard = _Heard()
    logger = logging.Logger("etl.config.librdkafka-probe")
    logger.addHandler(heard)
    try:
        AdminClient({key: value, "logger": logger}).poll(0)  # the logs queued while it was built
    except KafkaException:
        return False
    return any("is a consumer property" in line for line in heard.lines)


class _Heard(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _librdkafka_refused(s: Section, client: Mapping[str, str], reason: str) -> ConfigError:
    reason = reason.removeprefix("Failed to create consumer: ").strip()
    for key in KAFKA_SECRET_KEYS:
        if client.get(key):
            reason = reason.replace(client[key], "***")
    key = _named_key(reason, client)
    if reason.startswith("No such configuration property"):
        reason += (f"; the keys the ETL reads itself are {', '.join(KAFKA_OWN_KEYS)}, and every other key goes to "
                   f"librdkafka")
        # the secret keys too: a misspelt one is the likelier mistake than a misspelt _file
        reason += did_you_mean(s.name, key, KAFKA_SECRET_KEYS) if key is not None else ""
    if reason.startswith("No provider for SASL mechanism GSSAPI"):
        reason += ("; the confluent-kafka wheel from PyPI bundles a librdkafka built without Cyrus SASL, so Kerberos "
                   "(GSSAPI) needs confluent-kafka built from source against a librdkafka with libsasl2 and its "
                   "GSSAPI plugin: scripts/gssapi-venv builds one (docs/cluster.md)")
    if key is None:
        return ConfigError(f"{s.path}: [{s.name}]: librdkafka refuses these settings: {reason}")
    if key.endswith(".location") and not os.path.exists(client[key]):  # OpenSSL would only say "BIO lib"
        reason = f"{client[key]} does not exist ({reason})"
    return s.fail(key, f"librdkafka refuses it: {reason}")


def _named_key(reason: str, client: Mapping[str, str]) -> str | None:
    """The configured key a librdkafka message is about: one it quotes, else the first it names."""
    quoted = [key for key in re.findall(r'"([^"]+)"', reason) if key in client]
    if quoted:
        return quoted[0]
    found = [(match.start(), key) for key in client
             for match in [re.search(rf"(?<![\w.]){re.escape(key)}(?![\w.])", reason)] if match]
    return min(found)[1] if found else None
