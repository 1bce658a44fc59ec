"""Inline comments, ETL__SECTION__KEY environment overrides, and `etl config`, which shows the
effective config with its secrets masked."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from etl.config import effective_ini, load_config, render_effective
from etl.config.overrides import masked
from etl.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "warehouse_schema" / "events.sql"

BASE = f"""
[job]
name = j1                      # the job's name
max_rejected_ratio = 0.25      ; a quarter
[kafka]
bootstrap.servers = 127.0.0.1:9092   # the brokers
topics = a, b                  ; two topics
[zookeeper]
hosts = 127.0.0.1:2181   # a comment after hosts once reached kazoo
auth = none   # none (default) | digest
[warehouse]
url = file:///tmp/w
[hive]
database = db
table = t
schema = {SCHEMA}
"""


def write(tmp_path: Path, text: str = BASE) -> Path:
    path = tmp_path / "job.ini"
    path.write_text(text, encoding="utf-8")
    return path


def test_inline_comments_after_whitespace_are_stripped(tmp_path):
    config = load_config(write(tmp_path), environ={})
    assert config.job.name == "j1"
    assert config.job.max_rejected_ratio == 0.25
    assert config.kafka.topics == ("a", "b")
    assert config.kafka.client["bootstrap.servers"] == "127.0.0.1:9092"
    assert config.zookeeper.hosts == "127.0.0.1:2181"


def test_a_marker_without_whitespace_before_it_stays_in_the_value(tmp_path):
    text = BASE.replace("topics = a, b                  ; two topics", "topics_regex = ^logs[#;]x$  # the regex")
    text += "[schema_registry]\nurl = http://127.0.0.1:8081/#fragment\n"
    text = text.replace("name = j1 ", "name = j1\ndecoder = avro ")
    config = load_config(write(tmp_path, text), environ={})
    assert config.kafka.topics_regex.pattern == "^logs[#;]x$"
    assert config.schema_registry.client["url"] == "http://127.0.0.1:8081/#fragment"


@pytest.mark.parametrize("line", ["sasl.password = abc #1", "sasl.password = abc ;1"])
def test_a_comment_after_a_secret_is_refused_rather_than_cutting_the_secret_short(tmp_path, line):
    path = write(tmp_path, BASE.replace("[zookeeper]", f"{line}\n[zookeeper]"))
    with pytest.raises(ConfigError, match=r"\[kafka\] sasl.password: a secret's line must hold its value alone"):
        load_config(path, environ={})


def test_an_override_replaces_a_value_matching_names_without_regard_to_case_and_separators(tmp_path):
    config = load_config(write(tmp_path), environ={
        "ETL__KAFKA__BOOTSTRAP_SERVERS": "10.0.0.1:9092",
        "ETL__JOB__MAX_REJECTED_RATIO": "0.5",
        "etl__kafka__topics": "c",
    })
    assert config.kafka.client["bootstrap.servers"] == "10.0.0.1:9092"
    assert config.job.max_rejected_ratio == 0.5
    assert config.kafka.topics == ("c",)


def test_an_override_adds_keys_and_sections_the_file_lacks(tmp_path):
    _, overrides = effective_ini(write(tmp_path), environ={
        "ETL__KAFKA__SASL_MECHANISM": "PLAIN",  # librdkafka's spelling: dots
        "ETL__KAFKA__SASL_PASSWORD_FILE": "/run/secret",  # the ETL's own key, as it is spelt
        "ETL__RETRY__ATTEMPTS": "7",  # a section the file lacks
        "ETL__SPARK__spark.sql.shuffle.partitions": "3",  # taken as written
    })
    assert {(o.section, o.key) for o in overrides} == {
        ("kafka", "sasl.mechanism"), ("kafka", "sasl.password_file"), ("retry", "attempts"),
        ("spark", "spark.sql.shuffle.partitions")}
    config = load_config(write(tmp_path), environ={"ETL__RETRY__ATTEMPTS": "7",
                                                   "ETL__SPARK__spark.sql.shuffle.partitions": "3"})
    assert config.retry.attempts == 7
    assert config.spark == {"spark.sql.shuffle.partitions": "3"}


def test_an_override_spells_a_key_the_file_lacks_as_the_table_declares_it(tmp_path):
    _, overrides = effective_ini(write(tmp_path), environ={
        "ETL__SCHEMA_REGISTRY__BASIC_AUTH_USER_INFO_FILE": "/run/registry",  # dots and an underscore
        "ETL__SCHEMA_REGISTRY__SSL_CA_LOCATION": "/etc/ca.pem",
        "ETL__KAFKA__SASL_PASSWORD": "x",  # a librdkafka key the ETL knows, not the table's
        "ETL__KAFKA__TOPICS_REGEX": "a.*",  # an ETL key of [kafka]: not librdkafka's dots
    })
    assert {(o.section, o.key) for o in overrides} == {
        ("schema_registry", "basic.auth.user.info_file"), ("schema_registry", "ssl.ca.location"),
        ("kafka", "sasl.password"), ("kafka", "topics_regex")}


def test_an_override_of_a_dimension_section_matches_its_name_with_underscores(tmp_path):
    text = BASE + "[dimension countries]\nsource = /data/countries.csv\n"
    parser, overrides = effective_ini(write(tmp_path, text), environ={
        "ETL__DIMENSION_COUNTRIES__SOURCE": "/data/other.csv"})
    assert parser["dimension countries"]["source"] == "/data/other.csv"
    assert overrides[0].section == "dimension countries"


def test_an_override_value_is_taken_as_is_comment_markers_included(tmp_path):
    parser, _ = effective_ini(write(tmp_path), environ={"ETL__KAFKA__SASL_PASSWORD": "p #1 ;2"})
    assert parser["kafka"]["sasl.password"] == "p #1 ;2"


@pytest.mark.parametrize("variable, value, message", [
    ("ETL__JOB__MAX_REJECTED_RATIO", "2", r"\[job\] max_rejected_ratio: '2' is not valid: must be between 0 and 1 "
                                          r"\(set by the environment variable ETL__JOB__MAX_REJECTED_RATIO\)"),
    ("ETL__JOB__NAMEE", "x", r"\[job\] namee: unknown key.*ETL__JOB__NAMEE"),
    ("ETL__JOBS__NAME", "x", r"unknown section \[jobs\].*ETL__JOBS__NAME"),
    ("ETL__JOB", "x", r"environment variable ETL__JOB: is not ETL__<SECTION>__<KEY>"),
])
def test_a_bad_override_is_a_config_error_naming_the_variable(tmp_path, variable, value, message):
    with pytest.raises(ConfigError, match=message):
        load_config(write(tmp_path), environ={variable: value})


@pytest.mark.parametrize("section, key, value, shown", [
    ("kafka", "sasl.password", "hunter2", "***"),
    ("kafka", "ssl.key.password", "hunter2", "***"),
    ("schema_registry", "ssl.key.password", "hunter2", "***"),
    ("schema_registry", "basic.auth.user.info", "u:hunter2", "***"),
    ("kafka", "sasl.oauthbearer.client.secret", "s", "***"),
    ("spark", "spark.hadoop.fs.s3a.secret.key", "s", "***"),
    ("kafka", "ssl.key.pem", "-----BEGIN PRIVATE KEY-----", "***"),
    ("kafka", "sasl.password_file", "/run/secrets/kafka", "/run/secrets/kafka"),  # a path, not the secret
    ("zookeeper", "digest_password_file", "zk.secret", "zk.secret"),
    ("schema_registry", "ssl.key.location", "/etc/tls/key.pem", "/etc/tls/key.pem"),
    ("metrics", "pushgateway", "http://etl:hunter2@gw:9091", "http://etl:***@gw:9091"),
    ("schema_registry", "url", "http://gw:9091/#x", "http://gw:9091/#x"),
    ("dimension countries", "join_key", "country", "country"),
])
def test_secrets_are_masked(section, key, value, shown):
    assert masked(section, key, value) == shown


def test_the_rendering_marks_overrides_masks_secrets_and_parses_back(tmp_path):
    parser, overrides = effective_ini(write(tmp_path), environ={"ETL__KAFKA__SASL_PASSWORD": "hunter2"})
    text = render_effective(parser, overrides, "job.ini")
    assert "hunter2" not in text
    assert "; from the environment: ETL__KAFKA__SASL_PASSWORD\nsasl.password = ***\n" in text
    again = write(tmp_path, text)
    assert effective_ini(again, environ={})[0]["kafka"]["sasl.password"] == "***"


def run_etl(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.upper().startswith("ETL__")}
    return subprocess.run([sys.executable, "-m", "etl", *args], capture_output=True, text=True,
                          env={**clean, **env}, cwd=REPO)


def test_etl_config_prints_the_effective_config_masked(tmp_path):
    result = run_etl("config", "--config", str(write(tmp_path)),
                     env={"ETL__ZOOKEEPER__HOSTS": "zk1:2181", "ETL__KAFKA__SASL_PASSWORD": "hunter2"})
    assert result.returncode == 0, result.stderr
    assert "; from the environment: ETL__ZOOKEEPER__HOSTS\nhosts = zk1:2181\n" in result.stdout
    assert "sasl.password = ***" in result.stdout and "hunter2" not in result.stdout + result.stderr
    assert "name = j1\n" in result.stdout  # the comment is gone


def test_etl_with_a_bad_override_exits_2_naming_the_variable(tmp_path):
    result = run_etl("config", "--config", str(write(tmp_path)), env={"ETL__ZOOKEEPER__ROOT": "relative"})
    assert result.returncode == 2
    assert "[zookeeper] root:" in result.stderr and "ETL__ZOOKEEPER__ROOT" in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("hosts", ["zk1:abc", "zk1:2181 zk2:2181", ","])
def test_a_bad_zookeeper_hosts_value_is_a_config_error_not_a_client_traceback(tmp_path, hosts):
    path = write(tmp_path, BASE.replace("hosts = 127.0.0.1:2181", f"hosts = {hosts}"))
    with pytest.raises(ConfigError, match=r"\[zookeeper\] hosts: .* is not valid"):
        load_config(path, environ={})
