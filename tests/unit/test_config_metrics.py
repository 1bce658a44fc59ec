"""[metrics]: parsed into MetricsConfig; a bad value exits 2 naming the key."""
from pathlib import Path

import pytest

from etl.config import MetricsConfig, load_config
from etl.errors import EXIT_USAGE, ConfigError
from tests.harness.config_file import minimal_ini
from tests.harness.paths import EVENTS_SCHEMA


def load(tmp_path, metrics: str):
    path = tmp_path / "job.ini"
    path.write_text(minimal_ini(EVENTS_SCHEMA, sections=f"[metrics]\n{metrics}\n" if metrics is not None else ""))
    return load_config(path).metrics


def test_without_the_section_nothing_is_published(tmp_path):
    path = tmp_path / "job.ini"
    path.write_text(minimal_ini(EVENTS_SCHEMA))
    metrics = load_config(path).metrics
    assert metrics == MetricsConfig() and not metrics.enabled and metrics.push_timeout_seconds == 5.0


def test_both_targets_and_the_timeout_are_read(tmp_path):
    metrics = load(tmp_path, f"pushgateway = https://gw.example:9091/\ntextfile = {tmp_path}/etl_j1.prom\n"
                             f"push_timeout_seconds = 2.5")
    assert metrics == MetricsConfig("https://gw.example:9091", Path(tmp_path / "etl_j1.prom"), 2.5)
    assert metrics.enabled


@pytest.mark.parametrize("line, message", [
    ("pushgateway = gw:9091", r"\[metrics\] pushgateway: 'gw:9091' is not valid: must be an http:// or https://"),
    ("pushgateway = ftp://gw:9091", r"\[metrics\] pushgateway: .*must be an http:// or https:// URL"),
    ("pushgateway = http://gw:9091/?x=1", r"\[metrics\] pushgateway: .*without \?query"),
    ("textfile = etl.prom", r"\[metrics\] textfile: .*must be an absolute path"),
    ("textfile = /tmp/etl.txt", r"\[metrics\] textfile: .*must end in .prom"),
    ("textfile = /nonexistent-folder/etl.prom", r"\[metrics\] textfile: .*folder /nonexistent-folder does not exist"),
    ("push_timeout_seconds = 0", r"\[metrics\] push_timeout_seconds: .*greater than 0"),
    ("push_timeout_seconds = nan", r"\[metrics\] push_timeout_seconds: .*greater than 0"),
    ("push_timeout_seconds = soon", r"\[metrics\] push_timeout_seconds: 'soon' is not valid"),
    ("pushgatway = http://gw:9091", r"\[metrics\] pushgatway: unknown key; known keys in \[metrics\]"),
])
def test_a_bad_value_names_the_key_and_exits_2(tmp_path, line, message):
    with pytest.raises(ConfigError, match=message) as caught:
        load(tmp_path, line)
    assert caught.value.exit_code == EXIT_USAGE
