"""[hive] metastore_client: the driver's Thrift client for a thrift:// metastore, Spark's Hive
client for an embedded one or one behind SASL; a choice those rule out exits 2, naming the key."""
import pytest

from etl.config import MetastoreClient, load_config
from etl.errors import EXIT_USAGE, ConfigError
from tests.harness.config_file import minimal_ini

SASL = "[spark]\nspark.hadoop.hive.metastore.sasl.enabled = true\n"


def hive(tmp_path, request, lines: str = "", sections: str = ""):
    schema = request.config.rootpath / "warehouse_schema" / "events.sql"
    path = tmp_path / "job.ini"
    path.write_text(minimal_ini(schema, sections=sections).replace("[hive]\n", f"[hive]\n{lines}", 1))
    return load_config(path).hive


def test_a_thrift_metastore_is_read_by_the_driver_s_thrift_client(tmp_path, request):
    assert hive(tmp_path, request, "metastore = thrift://h:9083\n").metastore_client is MetastoreClient.THRIFT


@pytest.mark.parametrize("lines, sections", [("", ""), ("metastore = thrift://h:9083\n", SASL)],
                         ids=["embedded", "sasl"])
def test_an_embedded_metastore_or_one_behind_sasl_is_read_by_spark(tmp_path, request, lines, sections):
    assert hive(tmp_path, request, lines, sections).metastore_client is MetastoreClient.SPARK


def test_spark_may_be_chosen_for_a_thrift_metastore(tmp_path, request):
    chosen = hive(tmp_path, request, "metastore = thrift://h:9083\nmetastore_client = spark\n").metastore_client
    assert chosen is MetastoreClient.SPARK


@pytest.mark.parametrize("lines, sections, why", [
    ("metastore_client = thrift\n", "", "metastore = embedded"),
    ("metastore = thrift://h:9083\nmetastore_client = thrift\n", SASL, "sasl.enabled = true"),
    ("metastore = thrift://h:9083\nmetastore_client = jdbc\n", "", "'jdbc' is not one of thrift, spark"),
], ids=["embedded", "sasl", "unknown"])
def test_a_client_that_cannot_be_used_exits_2_naming_the_key(tmp_path, request, lines, sections, why):
    with pytest.raises(ConfigError, match=r"\[hive\] metastore_client") as raised:
        hive(tmp_path, request, lines, sections)
    assert why in str(raised.value) and raised.value.exit_code == EXIT_USAGE


TIMEOUT_KEY = "spark.hadoop.hive.metastore.client.socket.timeout"


@pytest.mark.parametrize("value, seconds", [(None, 60.0), ("10s", 10.0), ("30", 30.0), ("1500ms", 1.5),
                                            ("2m", 120.0), ("600sec", 600.0)])
def test_the_thrift_client_waits_as_long_as_hive_s_own_socket_timeout_says(tmp_path, request, value, seconds):
    """The one setting a cluster already has for its metastore calls ([spark], as Hive's client
    reads it, in Hive's time units; seconds when none) bounds the driver's Thrift calls too."""
    sections = "" if value is None else f"[spark]\n{TIMEOUT_KEY} = {value}\n"
    assert hive(tmp_path, request, "metastore = thrift://h:9083\n", sections).metastore_timeout_seconds == seconds


@pytest.mark.parametrize("value", ["ten", "0s", "-5s", "10 parsecs"])
def test_a_socket_timeout_that_is_not_a_positive_duration_exits_2_naming_it(tmp_path, request, value):
    with pytest.raises(ConfigError, match=rf"\[spark\] {TIMEOUT_KEY}") as raised:
        hive(tmp_path, request, "metastore = thrift://h:9083\n", f"[spark]\n{TIMEOUT_KEY} = {value}\n")
    assert raised.value.exit_code == EXIT_USAGE


def test_the_command_s_thrift_client_is_built_with_that_timeout(tmp_path, request):
    from etl.context.command import CommandContext
    schema = request.config.rootpath / "warehouse_schema" / "events.sql"
    path = tmp_path / "job.ini"
    path.write_text(minimal_ini(schema, sections=f"[spark]\n{TIMEOUT_KEY} = 7s\n").replace(
        "[hive]\n", "[hive]\nmetastore = thrift://127.0.0.1:9\n", 1))
    with CommandContext(load_config(path)) as context:
        assert context.catalog.timeout_seconds == 7.0
