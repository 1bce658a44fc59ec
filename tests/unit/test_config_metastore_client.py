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
