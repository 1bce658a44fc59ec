"""[kafka] topics_regex is matched in linear time (RE2), so that no pattern and no topic name can
hang a command, and a pattern RE2 cannot run is refused at start-up naming the key."""
import subprocess
import sys
import textwrap

import pytest

from etl.errors import EXIT_USAGE, ConfigError
from tests.harness.config_file import minimal_ini

EVIL_TOPIC = "rt_redos_" + "a" * 34 + "-"


def test_a_backtracking_pattern_against_a_long_near_miss_ends(tmp_path, request):
    """Python's re takes 2**34 steps here (hours at 100% CPU). The subprocess's timeout only
    guards the suite from hanging; the assertion is on what the match answered."""
    schema = request.config.rootpath / "warehouse_schema" / "events.sql"
    ini = tmp_path / "job.ini"
    ini.write_text(minimal_ini(schema, kafka="topics_regex = rt_redos_(a+)+\n"))
    script = textwrap.dedent(f"""
        from etl.config import load_config
        from etl.source.topics import matching_topics
        config = load_config({str(ini)!r})
        print(matching_topics(config.kafka.topics_regex, [{EVIL_TOPIC!r}, "rt_redos_aaa"]).loaded)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          cwd=request.config.rootpath)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "('rt_redos_aaa',)"


@pytest.mark.parametrize("pattern, why", [
    ("(?!test).*", "invalid perl operator: \\(\\?!"),
    ("(a)\\1", "invalid escape sequence: \\\\1"),
])
def test_a_pattern_re2_cannot_run_is_refused_naming_the_key(config_with, pattern, why):
    with pytest.raises(ConfigError, match=r"\[kafka\] topics_regex: .*not a pattern RE2 can run \(" + why) as refused:
        config_with(f"topics_regex = {pattern}\n")
    assert refused.value.exit_code == EXIT_USAGE


def test_the_pattern_keeps_its_text_and_compares_by_it(config_with):
    config = config_with("topics_regex = clicks-(eu|us)\\..*\n")
    assert config.kafka.topics_regex.pattern == r"clicks-(eu|us)\..*"
    assert config.kafka.topics_regex == config_with("topics_regex = clicks-(eu|us)\\..*\n").kafka.topics_regex
    assert config.kafka.topics_regex.fullmatch("clicks-eu.x") and not config.kafka.topics_regex.fullmatch("clicks-eu")


def test_a_pattern_that_names_internal_topics_reports_them_instead_of_dropping_them_silently():
    """Kafka's internal topics (`__...`) are never loaded. A pattern written to reach them (its
    text has `__`) hears so: they are set apart, and `etl status` and `verify` list them as not
    loaded, with why; a pattern such as `.*` skips them without a word, as documented."""
    from etl.config.topic_pattern import TopicPattern
    from etl.source.topics import NotLoadedReason, matching_topics, not_loaded_topics
    names = ["__consumer_offsets", "__transaction_state", "events"]
    named = matching_topics(TopicPattern("__consumer_offsets|events"), names)
    assert (named.loaded, named.internal) == (("events",), ("__consumer_offsets",))
    assert matching_topics(TopicPattern(".*"), names).internal == ()
    found = not_loaded_topics(named, {}, on_broker=names)
    assert [(t.topic, t.reason) for t in found] == [("__consumer_offsets", NotLoadedReason.INTERNAL)]
