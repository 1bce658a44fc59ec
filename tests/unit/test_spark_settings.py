"""The settings the driver's session gets for the metastore (etl.hive.spark.hive_settings)."""
from __future__ import annotations

from etl.config import load_config
from etl.hive.spark import METASTORE_FILTER_HOOK, hive_settings
from tests.harness.config_file import EVENTS_SCHEMA, minimal_ini

HOOK = "org.apache.hadoop.hive.ql.security.authorization.plugin.AuthorizationMetaStoreFilterHook"


def config(tmp_path, hive: str = ""):
    path = tmp_path / "job.ini"
    path.write_text(minimal_ini(EVENTS_SCHEMA).replace("database = db", f"database = db\n{hive}"))
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
