"""The consumer group the committed offsets are mirrored to ([kafka] consumer_group,
commit_to_consumer_group), and `etl reset-offsets --to-datetime`'s time: parsed once, at the
edge, and refused with exit 2 naming the key or the option. The mirror itself and the reset by
time run against the real broker in tests/integration/test_kafka_consumer_groups.py and
test_reset_to_datetime.py."""
from __future__ import annotations

import re
import socket
from datetime import datetime, timedelta, timezone

import pytest

from etl import cli
from etl.config import load_config
from etl.errors import ConfigError
from etl.ops.reset import epoch_ms, parse_instant
from etl.source.group_mirror import OffsetMirror, mirror_settings
from tests.harness.config_file import minimal_ini


def test_the_group_is_etl_dash_the_job_name_by_default(config_with):
    assert config_with("topics = a\n").kafka.consumer_group == "etl-j1"


def test_consumer_group_names_another_group(config_with):
    assert config_with("topics = a\nconsumer_group = analytics.clicks-loader\n").kafka.consumer_group == \
        "analytics.clicks-loader"


def test_the_mirror_can_be_turned_off(config_with):
    config = config_with("topics = a\ncommit_to_consumer_group = false\n")
    assert config.kafka.consumer_group is None
    assert OffsetMirror(config.kafka).commit({("a", 0): 5})  # no client, nothing to commit to: not a failure


@pytest.mark.parametrize("lines, message", [
    ("consumer_group = my group\n", r"\[kafka\] consumer_group: 'my group' is not valid: .*without spaces"),
    (f"consumer_group = {'g' * 250}\n", r"\[kafka\] consumer_group: .* is not valid: a consumer group id here is 1 "
                                       r"to 249"),
    ("commit_to_consumer_group = maybe\n", r"\[kafka\] commit_to_consumer_group: 'maybe' is not valid: write true "
                                          r"or false"),
    ("consumer_group = g\ncommit_to_consumer_group = false\n", r"\[kafka\] consumer_group: is set, but "
                                                                r"commit_to_consumer_group = false"),
    ("group.id = g\n", r"\[kafka\] group.id: is set by the ETL itself .*; consumer_group names the group"),
])
def test_a_bad_group_setting_is_refused_naming_the_key(config_with, lines, message):
    with pytest.raises(ConfigError, match=message):
        config_with("topics = a\n" + lines)


def test_the_mirrors_commit_waits_for_the_coordinator_no_longer_than_a_metadata_request(config_with):
    # librdkafka waits session.timeout.ms (45 s by default) for a group coordinator that never comes.
    config = config_with("topics = a\nmetadata_timeout_seconds = 4\nsession.timeout.ms = 60000\n")
    settings = mirror_settings(config.kafka, "etl-j1")
    assert (settings["group.id"], settings["session.timeout.ms"], settings["enable.auto.commit"]) == \
        ("etl-j1", 4000, False)
    assert settings["heartbeat.interval.ms"] < settings["session.timeout.ms"]


@pytest.mark.parametrize("raw, expected", [
    ("2026-11-25T14:30:00Z", datetime(2026, 11, 25, 14, 30, tzinfo=timezone.utc)),
    ("2026-11-25T15:30:00+01:00", datetime(2026, 11, 25, 14, 30, tzinfo=timezone.utc)),
    ("2026-11-25 14:30:00.250-05:30", datetime(2026, 11, 25, 20, 0, 0, 250_000, tzinfo=timezone.utc)),
    ("20261125T143000Z", datetime(2026, 11, 25, 14, 30, tzinfo=timezone.utc)),
    ("1970-01-01T00:00:00Z", datetime(1970, 1, 1, tzinfo=timezone.utc)),
])
def test_an_iso_8601_time_with_its_zone_is_read(raw, expected):
    assert parse_instant(raw) == expected


@pytest.mark.parametrize("raw, reason", [
    ("2026-11-25T14:30:00", "has no time zone: end it with Z for UTC, or an offset such as +01:00"),
    ("2026-11-25", "has no time zone"),
    ("yesterday", "is not an ISO 8601 time such as 2026-11-25T14:30:00Z"),
    ("2026-13-01T00:00:00Z", "is not an ISO 8601 time"),
    ("1969-12-31T23:59:59Z", "is before 1970-01-01T00:00:00Z, where Kafka's timestamps start"),
])
def test_a_time_that_does_not_say_its_zone_or_is_no_time_is_refused(raw, reason):
    with pytest.raises(ValueError, match=re.escape(reason)):
        parse_instant(raw)


def test_kafkas_milliseconds_round_up_so_that_a_record_before_the_time_is_never_at_or_after_it():
    at = datetime(2026, 11, 25, 14, 30, tzinfo=timezone.utc)
    whole = 1_795_617_000_000
    assert epoch_ms(at) == whole
    assert epoch_ms(at + timedelta(microseconds=1)) == whole + 1
    assert epoch_ms(at + timedelta(microseconds=999)) == whole + 1
    assert epoch_ms(at + timedelta(milliseconds=1)) == whole + 1


@pytest.mark.parametrize("value, says", [
    ("2026-11-25T14:30:00", "etl: error: --to-datetime: '2026-11-25T14:30:00' has no time zone: end it with Z"),
    ("soon", "etl: error: --to-datetime: 'soon' is not an ISO 8601 time"),
])
def test_reset_offsets_refuses_a_bad_time_with_exit_2_naming_the_option(config_with, tmp_path, capsys, value, says):
    config_with("topics = a\n")  # a valid job: the time is read before ZooKeeper or Kafka is asked anything
    assert cli.main(["reset-offsets", "--config", str(tmp_path / "job.ini"), "--to-datetime", value]) == 2
    assert says in capsys.readouterr().err


@pytest.mark.parametrize("argv, says", [
    (["--to", "latest", "--to-datetime", "2026-11-25T14:30:00Z"], "argument --to-datetime: not allowed with "
                                                                   "argument --to"),
    ([], "one of the arguments --to --to-datetime is required"),
])
def test_reset_offsets_takes_one_target(capsys, argv, says):
    with pytest.raises(SystemExit) as exited:
        cli.main(["reset-offsets", "--config", "never-read.ini", *argv])
    assert exited.value.code == 2
    assert says in capsys.readouterr().err


def test_a_commit_kafka_does_not_answer_is_one_warning_with_what_librdkafka_saw(tmp_path, request, caplog):
    """Nothing listens at the bootstrap address: the commit fails within the metadata timeout,
    and librdkafka's connection failures are summarised in the warning, not printed each."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ini = minimal_ini(request.config.rootpath / "warehouse_schema" / "events.sql",
                      kafka="topics = a\nmetadata_timeout_seconds = 1")
    (tmp_path / "job.ini").write_text(ini.replace("127.0.0.1:9092", f"127.0.0.1:{port}"))
    config = load_config(tmp_path / "job.ini")
    mirror = OffsetMirror(config.kafka)
    try:
        assert not mirror.commit({("a", 0): 5})
    finally:
        mirror.close()
    [warning] = [r.getMessage() for r in caplog.records if r.name == "etl.source.group_mirror"]
    assert "were not mirrored" in warning and "(librdkafka: " in warning and "Connection refused" in warning, warning
