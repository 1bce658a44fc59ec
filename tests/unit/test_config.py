"""Config validation: every error names the key and nothing is touched."""
import pytest

from etl.config import load_config
from etl.errors import ConfigError

SCHEMA = "../../warehouse_schema/events.sql"


def write(tmp_path, text):
    path = tmp_path / "job.ini"
    path.write_text(text)
    return path


BASE = """
[job]
name = j1
[kafka]
bootstrap.servers = 127.0.0.1:9092
topics = a, b.c
[zookeeper]
hosts = 127.0.0.1:2181
[warehouse]
url = file:///tmp/w
[hive]
database = db
table = t
schema = {schema}
"""


@pytest.fixture
def schema_path(request):
    return request.config.rootpath / "warehouse_schema" / "events.sql"


def test_valid_config_parses_into_typed_objects(tmp_path, schema_path):
    config = load_config(write(tmp_path, BASE.format(schema=schema_path)))
    assert config.kafka.topics == ("a", "b.c")
    assert config.job.max_records_per_partition == 1_000_000
    assert config.hive.metastore == "embedded"
    assert config.kafka.client == {"bootstrap.servers": "127.0.0.1:9092"}


@pytest.mark.parametrize("section, line, message", [
    ("job", "max_records_per_partiton = 5", r"\[job\] max_records_per_partiton: unknown key"),
    ("job", "max_records_per_partition = -1", r"\[job\] max_records_per_partition: must be greater than 0"),
    ("job", "starting_offsets = newest", r"\[job\] starting_offsets: 'newest' is not one of earliest, latest"),
    ("job", "max_rejected_ratio = 2", r"\[job\] max_rejected_ratio: '2' is not valid: must be between 0 and 1"),
    # The writer trusts these two (etl.job.partition_writer): they are checked here, once.
    ("job", "compression = lz4", r"\[job\] compression: 'lz4' is not one of snappy, zstd, gzip, none"),
    ("job", "row_group_size = 0", r"\[job\] row_group_size: must be greater than 0"),
    ("kafka", "enable.auto.commit = true", r"\[kafka\] enable.auto.commit: is set by the ETL itself"),
    ("hive", "metastore = mysql://x", r"\[hive\] metastore: 'mysql://x' is not valid"),
    ("warehouse", "url2 = x", r"\[warehouse\] url2: unknown key"),
    # nan passes `value <= 0`; an infinite fetch timeout hangs a stalled run while it holds the lock.
    ("kafka", "fetch_timeout_seconds = nan", r"\[kafka\] fetch_timeout_seconds: must be greater than 0"),
    ("kafka", "fetch_timeout_seconds = inf", r"\[kafka\] fetch_timeout_seconds: must be greater than 0"),
    ("zookeeper", "session_timeout_seconds = nan", r"\[zookeeper\] session_timeout_seconds: must be greater than 0"),
    ("zookeeper", "root = /etl/../x", r"\[zookeeper\] root: .*no '.' or '..' components"),
    ("spark", "spark.authenticate.secret = s3cr3t", r"\[spark\] spark.authenticate.secret: is a secret, and Spark "
                                                    r"would show it in `ps`.*spark.authenticate.secret.file"),
    ("spark", "spark.ssl.keyPassword = pw", r"\[spark\] spark.ssl.keyPassword: is a secret"),
    ("warehouse", "hive_location = file:///w' COMMENT 'x", r"\[warehouse\] hive_location: .*must not contain \"'\""),
])
def test_bad_key_is_named(tmp_path, schema_path, section, line, message):
    text = BASE.format(schema=schema_path)
    text = text.replace(f"[{section}]\n", f"[{section}]\n{line}\n") if f"[{section}]" in text else \
        f"{text}[{section}]\n{line}\n"
    with pytest.raises(ConfigError, match=message):
        load_config(write(tmp_path, text))


def test_secret_files_and_plain_spark_settings_are_kept(tmp_path, schema_path):
    text = BASE.format(schema=schema_path) + "[spark]\nspark.authenticate.secret.file = /etc/etl/secret\n"
    assert load_config(write(tmp_path, text)).spark == {"spark.authenticate.secret.file": "/etc/etl/secret"}


@pytest.mark.parametrize("url", ["file:///tmp/w' COMMENT 'x", "file:///tmp/w\\x", "file:///tmp/w\tx"])
def test_a_warehouse_url_that_would_break_a_sql_literal_is_refused(tmp_path, schema_path, url):
    text = BASE.format(schema=schema_path).replace("url = file:///tmp/w", f"url = {url}")
    with pytest.raises(ConfigError, match=r"\[warehouse\] url: .*must not contain"):
        load_config(write(tmp_path, text))


def test_hive_names_are_folded_to_lower_case_as_hive_does(tmp_path, schema_path):
    text = BASE.format(schema=schema_path).replace("database = db", "database = Sales") \
        .replace("table = t", "table = Events")
    config = load_config(write(tmp_path, text))
    assert (config.hive.database, config.hive.table) == ("sales", "events")


def test_missing_required_key_and_section_and_schema(tmp_path, schema_path):
    with pytest.raises(ConfigError, match=r"\[kafka\] topics: is required"):
        load_config(write(tmp_path, BASE.format(schema=schema_path).replace("topics = a, b.c", "")))
    with pytest.raises(ConfigError, match=r"section \[zookeeper\] is missing"):
        load_config(write(tmp_path, BASE.format(schema=schema_path).replace("[zookeeper]\nhosts = 127.0.0.1:2181", "")))
    with pytest.raises(ConfigError, match=r"\[hive\] schema: file .*nope.sql does not exist"):
        load_config(write(tmp_path, BASE.format(schema="nope.sql")))
    with pytest.raises(ConfigError, match="does not exist; pass --config"):
        load_config(tmp_path / "absent.ini")


@pytest.mark.parametrize("topics, message", [
    ("a, _audit", r"\[kafka\] topics: .*topic '_audit' starts with '_'.*Hive and Spark skip files"),
    (".hidden", r"\[kafka\] topics: .*topic '.hidden' starts with '.'"),
    ("a, b c", r"\[kafka\] topics: .*'b c' is not a valid Kafka topic name"),
    ("a, a", r"\[kafka\] topics: .*a topic is listed twice"),
    (",", r"\[kafka\] topics: .*names no topic"),
])
def test_topics_whose_files_hive_would_hide_or_kafka_would_refuse_are_named(tmp_path, schema_path, topics, message):
    text = BASE.format(schema=schema_path).replace("topics = a, b.c", f"topics = {topics}")
    with pytest.raises(ConfigError, match=message):
        load_config(write(tmp_path, text))


def test_a_temp_name_never_parses_as_a_committed_file():
    from etl.model.naming import final_name, parse_final_name, temp_name

    final = final_name("clicks", 3, 10, 20)
    assert parse_final_name(final) is not None
    assert parse_final_name(temp_name(final)) is None


def test_a_temp_name_is_not_matched_by_a_readers_parquet_glob():
    """Hive and Spark skip names that start with `_`; DuckDB's and pyarrow's `**/*.parquet`
    globs do not. Right after a killed run, such a glob counted a dead attempt's rows, or failed
    on a partial file, until the next run swept the temp files (the crash comparison found both)."""
    from fnmatch import fnmatch

    from etl.model.naming import final_name, is_temp_name, temp_name

    final = final_name("clicks", 3, 10, 20)
    assert fnmatch(final, "*.parquet")
    assert not fnmatch(temp_name(final), "*.parquet")
    assert is_temp_name(temp_name(final))
    assert is_temp_name(f"_tmp.0123abcd.{final}")  # a temp file an older version left is still swept
