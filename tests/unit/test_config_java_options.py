"""Secrets inside the [spark] *JavaOptions settings: a `-D<name>=<value>` whose name is a secret's
(`-Djavax.net.ssl.keyStorePassword=...`) is refused as the other [spark] secrets are (the value
would be on the JVM's command line, which `ps` shows to every user), without repeating the value;
and `etl config`, or any other display of a config value, masks it."""
from __future__ import annotations

import pytest

from etl.config import load_config
from etl.config.overrides import masked
from etl.errors import EXIT_USAGE, ConfigError
from tests.harness.config_file import minimal_ini
from tests.harness.paths import EVENTS_SCHEMA

SECRET = "hunter2-s3cr3t"


def _load(tmp_path, spark_lines: str, environ: dict | None = None):
    path = tmp_path / "job.ini"
    path.write_text(minimal_ini(EVENTS_SCHEMA, sections=f"[spark]\n{spark_lines}\n"))
    return load_config(path, environ=environ or {})


@pytest.mark.parametrize("key, option", [
    ("spark.driver.extraJavaOptions", f"-Djavax.net.ssl.keyStorePassword={SECRET}"),
    ("spark.executor.extraJavaOptions", f"-Djavax.net.ssl.trustStorePassword='{SECRET}'"),
    ("spark.driver.extraJavaOptions", f'-Dmy.api.token="{SECRET}"'),
    ("spark.yarn.am.extraJavaOptions", f"-Dfs.s3a.secret.key={SECRET}"),
])
def test_a_secret_system_property_in_java_options_is_refused_without_its_value(tmp_path, key, option):
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, f"{key} = -Xss4m {option} -Duser.timezone=UTC")
    message = str(caught.value)
    assert caught.value.exit_code == EXIT_USAGE
    assert f"[spark] {key}:" in message and option.split("=")[0] in message and "`ps`" in message, message
    assert SECRET not in message


def test_the_same_through_an_environment_override(tmp_path):
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, "", {"ETL__SPARK__spark.driver.extraJavaOptions": f"-Djavax.net.ssl.keyStorePassword={SECRET}"})
    assert SECRET not in str(caught.value) and "keyStorePassword" in str(caught.value)


def test_java_options_without_secrets_are_kept(tmp_path):
    options = "-Xss4m -Djavax.net.ssl.keyStore=/etc/etl/keystore.p12 -Dpassword.file=/etc/etl/pw -XX:+UseG1GC"
    assert _load(tmp_path, f"spark.driver.extraJavaOptions = {options}").spark == \
        {"spark.driver.extraJavaOptions": options}


def test_java_options_are_masked_wherever_a_value_is_shown():
    shown = masked("spark", "spark.driver.extraJavaOptions",
                   f"-Xss4m -Djavax.net.ssl.keyStorePassword={SECRET} -Dkey.token='{SECRET} x' -Duser.timezone=UTC")
    assert shown == "-Xss4m -Djavax.net.ssl.keyStorePassword=*** -Dkey.token=*** -Duser.timezone=UTC"
    assert masked("spark", "spark.driver.memory", "2g") == "2g"
