"""[warehouse]: file:// and (s)webhdfs:// urls, the WebHDFS keys, and errors that name the key."""
import pytest

from etl.config import load_config
from etl.errors import ConfigError

BASE = """
[job]
name = j1
[kafka]
bootstrap.servers = 127.0.0.1:9092
topics = a
[zookeeper]
hosts = 127.0.0.1:2181
[warehouse]
{warehouse}
[hive]
database = db
table = t
schema = {schema}
"""


@pytest.fixture
def load(tmp_path, request):
    schema = request.config.rootpath / "warehouse_schema" / "events.sql"

    def parse(*lines: str):
        path = tmp_path / "job.ini"
        path.write_text(BASE.format(warehouse="\n".join(lines), schema=schema))
        return load_config(path).warehouse

    return parse


def test_a_file_url_keeps_its_old_meaning(load):
    warehouse = load("url = file:///data/warehouse/")
    assert warehouse.url == "file:///data/warehouse" and warehouse.fs_root == "/data/warehouse"
    assert warehouse.hive_root == "file:///data/warehouse" and not warehouse.is_webhdfs
    moved = load("url = file:///data/w", "hive_location = file:///mnt/w")
    assert moved.hive_root == "file:///mnt/w"


def test_a_webhdfs_url_with_its_keys(load):
    warehouse = load("url = webhdfs://nn1.example:9870/warehouse/etl",
                     "hive_location = hdfs://nameservice1/warehouse/etl/", "user = etl", "timeout_seconds = 15")
    assert warehouse.fs_root == "/warehouse/etl" and warehouse.hive_root == "hdfs://nameservice1/warehouse/etl"
    assert warehouse.namenode_urls == "http://nn1.example:9870"
    assert (warehouse.user, warehouse.auth, warehouse.timeout_seconds) == ("etl", "simple", 15.0)


def test_swebhdfs_is_https_and_two_namenodes_make_an_ha_pair(load):
    warehouse = load("url = swebhdfs://nn1:9871,nn2:9871/w", "hive_location = hdfs://ns/w")
    assert warehouse.namenode_urls == "https://nn1:9871;https://nn2:9871"


def test_simple_auth_without_a_user_is_decided_once_where_the_config_is_read(load):
    import getpass
    assert load("url = webhdfs://nn:9870/w", "hive_location = hdfs://ns/w").user == getpass.getuser()


def test_kerberos_auth(load):
    warehouse = load("url = webhdfs://nn:9870/w", "hive_location = hdfs://ns/w", "auth = kerberos",
                     "kerberos_principal = etl/host@REALM")
    assert (warehouse.auth, warehouse.user, warehouse.kerberos_principal) == ("kerberos", None, "etl/host@REALM")


@pytest.mark.parametrize("lines, message", [
    (["url = webhdfs://nn:9870/w"], r"\[warehouse\] hive_location: is required when url is webhdfs://"),
    (["url = hdfs://nn:8020/w"], r"\[warehouse\] url: .*use file:///absolute/path, webhdfs://namenode:port"),
    (["url = webhdfs://nn/w", "hive_location = hdfs://ns/w"], r"\[warehouse\] url: .*'nn' is not host:port"),
    (["url = webhdfs://nn:9870/a/../b", "hive_location = hdfs://ns/w"], r"url: .*not a normalized absolute path"),
    (["url = file://relative/w"], r"\[warehouse\] url: .*file:///absolute/path"),
    (["url = webhdfs://nn:9870/w", "hive_location = /plain/path"], r"\[warehouse\] hive_location: .* is not valid"),
    (["url = webhdfs://nn:9870/w", "hive_location = hdfs://ns/w", "auth = ntlm"],
     r"\[warehouse\] auth: 'ntlm' is not one of simple, kerberos"),
    (["url = webhdfs://nn:9870/w", "hive_location = hdfs://ns/w", "auth = kerberos", "user = etl"],
     r"\[warehouse\] user: is for auth = simple"),
    (["url = webhdfs://nn:9870/w", "hive_location = hdfs://ns/w", "kerberos_principal = etl@R"],
     r"\[warehouse\] kerberos_principal: needs auth = kerberos"),
    (["url = webhdfs://nn:9870/w", "hive_location = hdfs://ns/w", "timeout_seconds = 0"],
     r"\[warehouse\] timeout_seconds: must be greater than 0"),
    (["url = file:///w", "user = etl"], r"\[warehouse\] user: applies only to a webhdfs:// or swebhdfs:// url"),
    (["url = webhdfs://nn:9870/w", "hive_location = hdfs://ns/w", "usr = etl"], r"\[warehouse\] usr: unknown key"),
])
def test_bad_warehouse_settings_name_the_key(load, lines, message):
    with pytest.raises(ConfigError, match=message):
        load(*lines)


KERBEROS = ["url = webhdfs://nn:9870/w", "hive_location = hdfs://ns/w", "auth = kerberos"]


def test_a_keytab_is_read_relative_to_the_config(load, tmp_path):
    (tmp_path / "etl.keytab").write_bytes(b"\x05\x02")
    warehouse = load(*KERBEROS, "kerberos_principal = etl@REALM", "kerberos_keytab = etl.keytab")
    assert (warehouse.kerberos_keytab, warehouse.kerberos_principal) == (str(tmp_path / "etl.keytab"), "etl@REALM")


@pytest.mark.parametrize("lines, message", [
    ([*KERBEROS, "kerberos_principal = etl@R", "kerberos_keytab = absent.keytab"],
     r"\[warehouse\] kerberos_keytab: cannot read .*absent.keytab: No such file or directory"),
    ([*KERBEROS, "kerberos_principal = etl@R", "kerberos_keytab = ."],
     r"\[warehouse\] kerberos_keytab: cannot read .*: Is a directory"),
    ([*KERBEROS, "kerberos_keytab = etl.keytab"],
     r"\[warehouse\] kerberos_principal: is required with kerberos_keytab"),
    (["url = webhdfs://nn:9870/w", "hive_location = hdfs://ns/w", "kerberos_keytab = etl.keytab"],
     r"\[warehouse\] kerberos_keytab: needs auth = kerberos"),
    (["url = file:///w", "kerberos_keytab = etl.keytab"],
     r"\[warehouse\] kerberos_keytab: applies only to a webhdfs:// or swebhdfs:// url"),
])
def test_a_bad_keytab_setting_names_the_key(load, tmp_path, lines, message):
    (tmp_path / "etl.keytab").write_bytes(b"\x05\x02")
    with pytest.raises(ConfigError, match=message) as refused:
        load(*lines)
    assert refused.value.exit_code == 2


def test_a_refused_kerberos_login_names_what_to_check(load, tmp_path):
    from etl.sink.fs.webhdfs_client import auth_hint
    (tmp_path / "etl.keytab").write_bytes(b"\x05\x02")
    keytab = load(*KERBEROS, "kerberos_principal = etl@R", "kerberos_keytab = etl.keytab")
    assert f"[warehouse] kerberos_keytab ({tmp_path / 'etl.keytab'})" in auth_hint(keytab)
    assert "etl@R" in auth_hint(keytab)
    assert "kinit" in auth_hint(load(*KERBEROS)) and "kerberos_keytab" in auth_hint(load(*KERBEROS))
