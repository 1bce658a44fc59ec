"""Config of the secured services: Kafka SASL/SSL settings and their secret files, ZooKeeper
digest auth. Secrets come from files, never show in a repr, and every bad value exits 2 naming
the key (librdkafka's own settings are judged by librdkafka, without connecting anywhere)."""
import pickle

import pytest

from etl.config import load_config
from etl.errors import ConfigError

BASE = """
[job]
name = j1
[kafka]
bootstrap.servers = 127.0.0.1:9
topics = a
{kafka}
[zookeeper]
hosts = 127.0.0.1:2181
{zookeeper}
[warehouse]
url = file:///tmp/w
[hive]
database = db
table = t
schema = {schema}
"""
SASL = "security.protocol = SASL_SSL\nsasl.mechanism = SCRAM-SHA-512\nsasl.username = etl"


@pytest.fixture
def write(tmp_path, request):
    schema = request.config.rootpath / "warehouse_schema" / "events.sql"

    def make(kafka="", zookeeper=""):
        path = tmp_path / "job.ini"
        path.write_text(BASE.format(kafka=kafka, zookeeper=zookeeper, schema=schema))
        return path
    return make


@pytest.fixture
def secret(tmp_path):
    path = tmp_path / "secrets" / "kafka-password"
    path.parent.mkdir()
    path.write_text("s3cr3t: with spaces \n")
    return path


def test_sasl_password_file_is_read_relative_to_the_config_and_never_shown(write, secret):
    config = load_config(write(kafka=f"{SASL}\nsasl.password_file = secrets/kafka-password"))
    assert config.kafka.client["sasl.password"] == "s3cr3t: with spaces "  # only the line break is dropped
    assert "sasl.password_file" not in config.kafka.client  # an ETL key, not librdkafka's
    for shown in (repr(config), str(config.kafka), repr(config.kafka.client)):
        assert "s3cr3t" not in shown and "'sasl.password': '***'" in shown
    assert pickle.loads(pickle.dumps(config.kafka)).client["sasl.password"] == "s3cr3t: with spaces "  # to the tasks


def test_an_inline_sasl_password_still_works_and_is_masked(write):
    config = load_config(write(kafka=f"{SASL}\nsasl.password = inline-secret"))
    assert config.kafka.client["sasl.password"] == "inline-secret"
    assert "inline-secret" not in repr(config)


@pytest.mark.parametrize("kafka, message", [
    (f"{SASL}\nsasl.password = x\nsasl.password_file = secrets/kafka-password",
     r"\[kafka\] sasl.password_file: set either sasl.password or sasl.password_file, not both"),
    (f"{SASL}\nsasl.password_file = secrets/absent",
     r"\[kafka\] sasl.password_file: cannot read .*secrets/absent: No such file or directory"),
    (f"{SASL}\nsasl.password_file = secrets",
     r"\[kafka\] sasl.password_file: cannot read .*secrets: Is a directory"),
    ("security.protocol = SASL", r"\[kafka\] security.protocol: librdkafka refuses it: Invalid value \"SASL\""),
    (f"{SASL}\nsasl.pasword = x", r"\[kafka\] sasl.pasword: librdkafka refuses it: No such configuration property"
                                  r".*the keys the ETL reads itself are .*sasl.password_file"),
    (f"{SASL}\nsasl.password = x\nsocket.timeout.ms = 5",
     r"\[kafka\] socket.timeout.ms: librdkafka refuses it: .* outside allowed range 10..300000$"),
    (f"{SASL}\nsasl.password = x\nssl.ca.location = /nonexistent/ca.pem",
     r"\[kafka\] ssl.ca.location: librdkafka refuses it: /nonexistent/ca.pem does not exist"),
    (SASL, r"\[kafka\] sasl.username: librdkafka refuses it: sasl.username and sasl.password must be set"),
    # The wheel's librdkafka has no Kerberos: say so at start-up, not at the first fetch.
    ("security.protocol = SASL_SSL", r"\[kafka\]: librdkafka refuses these settings: No provider for SASL "
                                     r"mechanism GSSAPI"),
])
def test_bad_kafka_security_settings_are_named(write, secret, kafka, message):
    with pytest.raises(ConfigError, match=message) as refused:
        load_config(write(kafka=kafka))
    assert refused.value.exit_code == 2
    assert "s3cr3t" not in str(refused.value)


def test_kerberos_for_kafka_says_the_wheel_cannot_and_what_can(write, tmp_path):
    # The confluent-kafka wheel's librdkafka has no Cyrus SASL: GSSAPI is refused at start-up,
    # with what would do it, not only librdkafka's "recompile librdkafka".
    (tmp_path / "etl.keytab").write_bytes(b"\x05\x02")
    with pytest.raises(ConfigError, match=r"\[kafka\]: librdkafka refuses these settings: No provider for SASL "
                                          r"mechanism GSSAPI.*built without Cyrus SASL.*docs/cluster.md") as refused:
        load_config(write(kafka="security.protocol = SASL_PLAINTEXT\nsasl.mechanism = GSSAPI\n"
                                "sasl.kerberos.principal = etl@ETL.TEST\n"
                                f"sasl.kerberos.keytab = {tmp_path / 'etl.keytab'}"))
    assert refused.value.exit_code == 2


def test_a_librdkafka_message_never_repeats_a_secret(write, tmp_path):
    (tmp_path / "pw").write_text("ssl-key-secret")
    with pytest.raises(ConfigError) as refused:
        load_config(write(kafka="security.protocol = SSL\nssl.key.location = /nonexistent/key.pem\n"
                                "ssl.key.password_file = pw"))
    assert "ssl-key-secret" not in str(refused.value)
    assert "[kafka] ssl.key.location: librdkafka refuses it: /nonexistent/key.pem does not exist" in str(refused.value)


def test_zookeeper_digest_reads_the_password_file(write, tmp_path):
    (tmp_path / "zk-password").write_text("zk-secret\r\n")
    config = load_config(write(zookeeper="auth = digest\ndigest_user = etl\ndigest_password_file = zk-password"))
    zk = config.zookeeper
    assert (zk.auth, zk.digest_user, zk.digest_password) == ("digest", "etl", "zk-secret")
    assert zk.digest_password_file == tmp_path / "zk-password"
    assert "zk-secret" not in repr(config)
    assert load_config(write()).zookeeper.auth == "none"


@pytest.mark.parametrize("zookeeper, message", [
    ("auth = sasl", r"\[zookeeper\] auth: 'sasl' is not one of none, digest"),
    ("auth = digest\ndigest_password_file = zk-password", r"\[zookeeper\] digest_user: is required"),
    ("auth = digest\ndigest_user = etl", r"\[zookeeper\] digest_password_file: is required with auth = digest"),
    ("auth = digest\ndigest_user = e:tl\ndigest_password_file = zk-password",
     r"\[zookeeper\] digest_user: 'e:tl' is not valid: a digest user name has no ':'"),
    ("auth = digest\ndigest_user = etl\ndigest_password_file = absent",
     r"\[zookeeper\] digest_password_file: cannot read .*absent: No such file or directory"),
    ("auth = digest\ndigest_user = etl\ndigest_password_file = empty",
     r"\[zookeeper\] digest_password_file: .*empty must hold the secret alone, on one line"),
    ("auth = digest\ndigest_user = etl\ndigest_password_file = two-lines",
     r"\[zookeeper\] digest_password_file: .*two-lines must hold the secret alone, on one line"),
    ("digest_user = etl", r"\[zookeeper\] digest_user: applies only to auth = digest"),
    ("auth = digest\ndigest_user = etl\ndigest_password_file = zk-password\ndigest_password = inline",
     r"\[zookeeper\] digest_password: unknown key"),
])
def test_bad_zookeeper_auth_is_named(write, tmp_path, zookeeper, message):
    (tmp_path / "zk-password").write_text("zk-secret\n")
    (tmp_path / "empty").write_text("\n")
    (tmp_path / "two-lines").write_text("a\nb\n")
    with pytest.raises(ConfigError, match=message):
        load_config(write(zookeeper=zookeeper))
