"""[kafka] topics_regex: parsed once, matched against the broker's topic names, and the topics the
job knows of but does not load (hidden names, deleted or no longer chosen topics)."""
import pytest

from etl.config.topic_pattern import TopicPattern
from etl.errors import ConfigError
from etl.source.topics import JobTopics, NotLoadedReason, matching_topics, not_loaded_topics


def test_topics_regex_is_compiled_once_and_leaves_the_list_empty(config_with):
    config = config_with("topics_regex = clicks-(eu|us)\\..*\n")
    assert config.kafka.topics == ()
    assert config.kafka.topics_regex == TopicPattern(r"clicks-(eu|us)\..*")
    assert config.kafka.topics_key == "topics_regex"


def test_a_topic_list_has_no_regex(config_with):
    config = config_with("topics = a, b\n")
    assert (config.kafka.topics, config.kafka.topics_regex, config.kafka.topics_key) == (("a", "b"), None, "topics")


@pytest.mark.parametrize("lines, message", [
    ("topics = a\ntopics_regex = a.*\n", r"\[kafka\] topics_regex: set either topics .* or topics_regex .*not both"),
    ("", r"\[kafka\] topics: is required: list the topics, .* or set topics_regex"),
    ("topics = \ntopics_regex = \n", r"\[kafka\] topics: is required"),
    ("topics_regex = clicks-(eu\n", r"\[kafka\] topics_regex: 'clicks-\(eu' is not valid: not a pattern RE2 can run "
                                    r"\(missing \): clicks-\(eu\)"),
])
def test_exactly_one_of_topics_and_topics_regex(config_with, lines, message):
    with pytest.raises(ConfigError, match=message):
        config_with(lines)


def test_the_regex_matches_whole_names_only():
    found = matching_topics(TopicPattern(r"clicks\.[a-z]+"), ["clicks.eu", "clicks.eu.old", "old.clicks.eu", "clicks."])
    assert found == JobTopics(("clicks.eu",), ())


def test_internal_topics_are_never_matched_and_hidden_names_are_set_apart():
    names = ["__consumer_offsets", "__transaction_state", "_schemas", ".hidden", "events", "audit", "events"]
    assert matching_topics(TopicPattern(".*"), names) == JobTopics(("audit", "events"), (".hidden", "_schemas"))
    assert matching_topics(TopicPattern("__.*"), names) == JobTopics((), (), ("__consumer_offsets",
                                                                              "__transaction_state"))


def test_topics_not_loaded_are_the_hidden_then_each_left_behind_with_why():
    topics = JobTopics(("events",), ("_schemas",))
    committed = {("events", 0): 10, ("gone", 1): 7, ("gone", 0): 5, ("renamed", 0): 3}
    found = not_loaded_topics(topics, committed, on_broker={"events", "renamed", "_schemas"})
    assert [(t.topic, t.reason, t.committed) for t in found] == [
        ("_schemas", NotLoadedReason.HIDDEN, {}),
        ("gone", NotLoadedReason.DELETED, {0: 5, 1: 7}),
        ("renamed", NotLoadedReason.UNCHOSEN, {0: 3}),
    ]


def test_each_reason_is_described_naming_the_key_that_chooses_topics(config_with):
    chooser = config_with("topics_regex = e.*\n").topics_chooser
    found = not_loaded_topics(JobTopics((), ("_x",)), {("gone", 0): 5, ("kept", 0): 1}, on_broker={"kept"})
    described = [t.describe(chooser) for t in found]
    assert described[0].startswith("_x: matches [kafka] topics_regex, but its name starts with '_'")
    assert described[1].startswith("gone: deleted from Kafka; its committed offsets of 1 partitions stay")
    assert described[2].startswith("kept: no longer chosen by [kafka] topics_regex;")
    assert found[1].to_json(chooser) == {"topic": "gone", "reason": "deleted", "detail": described[1],
                                        "committed": {"0": 5}}
