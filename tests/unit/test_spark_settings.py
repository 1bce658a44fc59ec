"""The settings the driver's session gets: for the metastore (etl.hive.spark.hive_settings), and the
JVM options of a driver JVM that `etl` starts itself ([jvm] quick_start)."""
from __future__ import annotations

import pytest

from etl.config import load_config
from etl.hive.spark import METASTORE_FILTER_HOOK, hive_settings
from tests.harness.config_file import EVENTS_SCHEMA, minimal_ini

HOOK = "org.apache.hadoop.hive.ql.security.authorization.plugin.AuthorizationMetaStoreFilterHook"


def config(tmp_path, hive: str = "", sections: str = ""):
    path = tmp_path / "job.ini"
    path.write_text(minimal_ini(EVENTS_SCHEMA, sections=sections).replace("database = db", f"database = db\n{hive}"))
    return load_config(path)


def test_the_session_starts_with_the_filter_hook_hives_first_authorization_check_switches_to(tmp_path):
    # Hive's session switches hive.metastore.filter.hook on its first authorization check (the
    # first partition lookup): its metastore client then drops its connection and sleeps 1 s
    # before it reconnects. Set from the start, the switch changes nothing.
    settings = hive_settings(config(tmp_path, "metastore = thrift://127.0.0.1:9083"), given=set())
    assert settings[METASTORE_FILTER_HOOK] == HOOK
    assert settings["spark.hadoop.hive.metastore.uris"] == "thrift://127.0.0.1:9083"


def test_a_filter_hook_the_job_or_spark_submit_names_is_kept(tmp_path):
    assert METASTORE_FILTER_HOOK not in hive_settings(config(tmp_path), given={METASTORE_FILTER_HOOK})


# -- the driver JVM `etl` starts itself: C1 only and the serial collector ([jvm] quick_start) ---
def test_a_driver_jvm_etl_starts_itself_runs_c1_only_with_the_serial_collector(tmp_path):
    # The driver plans and coordinates; Python workers write the rows. C2 and G1's threads only
    # compete for the cores at its start (docs/performance.md, the fixed cost phase by phase).
    options = config(tmp_path).jvm.quick_start_options(given="")
    assert options.split() == ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]


@pytest.mark.parametrize("given, kept", [
    ("-XX:+UseG1GC -Dx=1", ["-XX:TieredStopAtLevel=1"]),
    ("-XX:+UseParallelGC", ["-XX:TieredStopAtLevel=1"]),
    ("-XX:TieredStopAtLevel=4", ["-XX:+UseSerialGC"]),
    ("-XX:-TieredCompilation -XX:+UseZGC", []),
])
def test_a_jit_or_collector_the_spark_section_chooses_is_its_own(tmp_path, given, kept):
    assert config(tmp_path).jvm.quick_start_options(given).split() == kept


def test_quick_start_false_starts_the_jvm_as_spark_does_and_a_bad_value_exits_2(tmp_path):
    from etl.errors import EXIT_USAGE, ConfigError
    assert config(tmp_path, sections="[jvm]\nquick_start = false\n").jvm.quick_start_options("") == ""
    with pytest.raises(ConfigError, match=r"\[jvm\] quick_start: 'fast' is not valid: write true or false") as bad:
        config(tmp_path, sections="[jvm]\nquick_start = fast\n")
    assert bad.value.exit_code == EXIT_USAGE


def test_a_class_archive_recorded_without_quick_start_is_not_mapped_with_it(tmp_path):
    from etl.hive.class_archive import archive_key
    settings = {"spark.driver.memory": "1g"}
    assert archive_key(settings, config(tmp_path).jvm) != \
        archive_key(settings, config(tmp_path, sections="[jvm]\nquick_start = false\n").jvm)


# -- a local master's defaults -----------------------------------------------------------------
def test_a_local_master_listens_on_loopback_without_a_web_ui():
    from etl.hive.spark import local_master_settings
    assert local_master_settings(given=set()) == {
        "spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1", "spark.ui.enabled": "false"}


def test_a_local_masters_setting_the_job_or_spark_submit_gives_is_kept():
    from etl.hive.spark import local_master_settings
    kept = local_master_settings(given={"spark.ui.enabled", "spark.driver.host"})
    assert kept == {"spark.driver.bindAddress": "127.0.0.1"}
