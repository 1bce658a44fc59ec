"""The table of config keys (etl.config.keys), and what is held to it: Section reads only declared
keys, with the table's defaults; an unknown key's message guesses the declared one meant; `etl
config` masks the keys the table marks secret; docs/configuration.md documents each key with the
table's default and Kafka Connect setting; the model's dataclasses default as the table does; the
shipped configs set only declared keys."""
import configparser
import re
from dataclasses import MISSING, dataclass, fields
from pathlib import Path

import pytest

from etl.config import load_config
from etl.config.compaction import CompactionConfig
from etl.config.ini import is_secret_key, new_parser, parse_ini
from etl.config.jvm import JvmConfig
from etl.config.keys import (
    KEYS, Absent, Derived, SectionKind, UndeclaredKey, ValueKind, declared, declared_key, section_kind,
)
from etl.config.metrics import MetricsConfig
from etl.config.model import (
    HiveConfig, JobConfig, KafkaConfig, RetryConfig, SchemaRegistryConfig, SuccessMarkerConfig, WarehouseConfig,
    ZooKeeperConfig,
)
from etl.config.overrides import masked
from etl.config.partitioning import PartitioningConfig
from etl.config.section import Section, boolean
from etl.errors import ConfigError


def section(header: str, **values: str) -> Section:
    parser = configparser.ConfigParser()
    parser.read_dict({header: values})
    return Section(parser, header, Path("job.ini"))


def test_reading_an_undeclared_key_is_a_bug_not_a_config_error():
    with pytest.raises(UndeclaredKey, match=r"\[job\] nmae, which etl/config/keys.py does not declare"):
        section("job", name="j").get("nmae")


def test_a_section_the_table_has_no_entries_for_declares_nothing():
    assert section_kind("spark") is None
    with pytest.raises(UndeclaredKey):
        section("spark").get("spark.master")


def test_named_sections_share_their_kind_s_keys():
    assert section_kind("route clicks") is SectionKind.ROUTE
    assert section_kind("dimension countries") is SectionKind.DIMENSION
    assert declared("route clicks", "table") is declared("route other", "table") is not None


def test_the_default_comes_from_the_table_converted_as_a_written_value_would_be():
    s = section("job")
    assert s.positive("max_records_per_partition") == 1_000_000
    assert s.positive("progress_seconds") == 10.0 and isinstance(s.positive("progress_seconds"), float)
    assert s.choice("decoder") == "json" and type(s.choice("decoder")).__name__ == "DecoderKind"


def test_a_default_written_at_the_call_site_is_refused_when_the_table_has_one():
    with pytest.raises(UndeclaredKey, match="its default is etl/config/keys.py's"):
        section("job").get("max_records_per_partition", 5, int)


def test_a_derived_default_must_be_passed():
    with pytest.raises(UndeclaredKey, match="its default is derived; pass it"):
        section("kafka").get("consumer_group", convert=str)
    assert section("kafka").get("consumer_group", "etl-j", str) == "etl-j"


def test_a_required_key_is_required_unless_the_reader_says_otherwise():
    with pytest.raises(ConfigError, match=r"\[job\] name: is required"):
        section("job").get("name")
    assert section("hive").get("table", convert=str) is None  # required only without [route] sections


def test_every_entry_is_well_formed():
    for key in KEYS:
        assert key.doc and "\n" not in key.doc, key
        if isinstance(key.default, Absent | Derived):
            continue
        if key.kind is ValueKind.CHOICE:
            assert key.choices is not None and key.default in tuple(key.choices), key


@pytest.mark.parametrize("header, key, meant", [
    ("job", "max_records_per_partiton", "max_records_per_partition"),
    ("jvm", "class_archives", "class_archive"),
    ("route r", "tabel", "table"),
    ("dimension d", "colums", "columns"),
    ("hive", "partition_timezon", "partition_timezone"),
])
def test_an_unknown_key_is_refused_naming_the_declared_key_it_most_likely_misspells(header, key, meant):
    s = section(header, **{key: "x"})
    with pytest.raises(ConfigError, match=rf"\[{header}\] {key}: unknown key; known keys in \[{header}\]: \[\]; "
                                          rf"did you mean `{meant}`\?$"):
        s.reject_unknown()


def test_an_unknown_key_like_no_declared_one_gets_no_guess():
    with pytest.raises(ConfigError, match=r"unknown key; known keys in \[retry\]: \[\]$"):
        section("retry", zzz="1").reject_unknown()


@pytest.mark.parametrize("line, meant", [
    ("sasl.pasword = x", "sasl.password"),  # a librdkafka key the ETL knows: the secret, not its _file
    ("fetch_timeout_secs = 5", "fetch_timeout_seconds"),
])
def test_a_kafka_key_librdkafka_does_not_know_gets_a_guess_too(tmp_path, request, line, meant):
    schema = request.config.rootpath / "warehouse_schema" / "events.sql"
    path = tmp_path / "job.ini"
    path.write_text(f"[job]\nname = j\n[kafka]\nbootstrap.servers = 127.0.0.1:9\ntopics = a\n{line}\n"
                    f"[zookeeper]\nhosts = 127.0.0.1:2181\n[warehouse]\nurl = file:///tmp/w\n"
                    f"[hive]\ndatabase = db\ntable = t\nschema = {schema}\n")
    with pytest.raises(ConfigError, match=rf"No such configuration property.*; did you mean `{meant}`\?"):
        load_config(path, environ={})


def test_a_declared_key_is_masked_as_the_table_says_and_a_pass_through_key_by_its_name():
    assert masked("schema_registry", "basic.auth.user.info", "u:p") == "***"  # secret=True
    assert masked("kafka", "sasl.password", "p") == "***"  # librdkafka's: by its name
    # its name says "credentials", and its value is a mode (USER_INFO, URL, SASL_INHERIT): no secret
    assert masked("schema_registry", "basic.auth.credentials.source", "USER_INFO") == "USER_INFO"
    assert masked("kafka", "basic.auth.credentials.source", "x") == "***"  # not [kafka]'s: by its name


def test_the_table_and_the_names_agree_on_every_declared_secret_but_one():
    """Declared keys are masked by the table; the names' rule masked them before it. They differ
    on one key only, whose value is no secret."""
    differ = {(str(key.section), key.name) for key in KEYS if key.secret != is_secret_key(key.name)}
    assert differ == {("schema_registry", "basic.auth.credentials.source")}


def test_a_declared_secret_refuses_a_comment_after_its_value_and_a_declared_non_secret_takes_one():
    with pytest.raises(ConfigError, match=r"\[schema_registry\] ssl.key.password: a secret's line"):
        parse_ini("[schema_registry]\nssl.key.password = abc #1\n", "job.ini")
    parsed = parse_ini("[schema_registry]\nbasic.auth.credentials.source = USER_INFO  # from basic.auth.user.info\n",
                       "job.ini")
    assert parsed["schema_registry"]["basic.auth.credentials.source"] == "USER_INFO"


# docs/configuration.md: a table under each "## `[section]`" heading, a row per key (or per keys
# that share a meaning: "`a`, `b`", "`a` or `b`"): | key | default | meaning | [Kafka Connect HDFS] |
DOCS = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
CONF = Path(__file__).resolve().parents[2] / "conf"
_HEADING = re.compile(r"^## `\[(?P<section>[^\]]+)\]`")
_NONE = re.compile(r"^(—|none\b.*)$")  # the docs' words for "required, or unset"


@dataclass(frozen=True)
class DocumentedKey:
    section: str
    name: str
    default: str  # the default column, as written
    connect: str  # the Kafka Connect HDFS column, as written; "" where the table has none (its prose may name one)
    line: int


def documented_keys(text: str) -> list[DocumentedKey]:
    found, section = [], None
    for number, line in enumerate(text.splitlines(), 1):
        heading = _HEADING.match(line)
        if heading or line.startswith("## "):
            section = heading["section"] if heading else None
        elif section and line.startswith("| `"):
            cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
            connect = cells[3] if len(cells) > 3 else ""
            found += [DocumentedKey(section, name, cells[1], connect, number)
                      for name in re.findall(r"`([^`]+)`", cells[0])]
    return found


def documented_default_problem(key, documented: DocumentedKey) -> str | None:
    """Why the docs' default column does not say the table's default, or None."""
    if isinstance(key.default, Absent):
        return None if _NONE.match(documented.default) else \
            f"the table has no default, the docs say {documented.default!r}"
    if isinstance(key.default, Derived):
        return None if documented.default == key.default.description else \
            f"the table says {key.default.description!r}, the docs {documented.default!r}"
    return None if documented.default.strip("`") == key.default else \
        f"the table says {key.default!r}, the docs {documented.default!r}"


def test_the_docs_document_every_declared_key_and_no_other():
    documented = {(d.section, d.name) for d in documented_keys(DOCS.read_text(encoding="utf-8"))}
    declared_keys = {(str(key.section), key.name) for key in KEYS}
    assert sorted(documented - declared_keys) == [], "documented in docs/configuration.md, not in etl/config/keys.py"
    assert sorted(declared_keys - documented) == [], "in etl/config/keys.py, not documented in docs/configuration.md"


def test_the_docs_give_each_key_the_table_s_default_and_connect_setting():
    problems = []
    for documented in documented_keys(DOCS.read_text(encoding="utf-8")):
        key = declared(documented.section.replace("<name>", "x"), documented.name)
        if key is None:
            continue  # the test above names it
        problem = documented_default_problem(key, documented)
        if key.connect and documented.connect and f"`{key.connect}`" not in documented.connect:
            problem = (problem + "; " if problem else "") + f"its Kafka Connect setting {key.connect} is not in the row"
        if problem:
            where = f"docs/configuration.md:{documented.line}: [{documented.section}] {documented.name}"
            problems.append(f"{where}: {problem}")
    assert problems == []


def test_the_docs_check_names_what_differs():
    rows = documented_keys("## `[job]`\n\n| key | default | meaning |\n|---|---|---|\n"
                           "| `max_records_per_partition` | 5 | x |\n| `name`, `nmae` | — | y |\n")
    assert [(d.section, d.name, d.default) for d in rows] == [
        ("job", "max_records_per_partition", "5"), ("job", "name", "—"), ("job", "nmae", "—")]
    assert documented_default_problem(declared("job", "max_records_per_partition"), rows[0]) == \
        "the table says '1000000', the docs '5'"
    assert declared("job", "nmae") is None


@pytest.mark.parametrize("path", sorted(CONF.glob("*.ini")), ids=lambda path: path.name)
def test_the_shipped_configs_use_only_declared_keys(path):
    """[spark] and [kafka]'s librdkafka keys pass through; librdkafka spells its keys with dots,
    never an underscore, so an undeclared [kafka] key with one is a misspelt key of the ETL's."""
    parser = new_parser()
    parser.read(path, encoding="utf-8")
    undeclared = [f"[{name}] {key}" for name in parser.sections() if name != "spark" for key in parser[name]
                  if declared(name, key) is None and (name != "kafka" or "_" in key)]
    assert undeclared == []


# The dataclass fields a section's keys fill, which keep defaults of their own for the code that
# builds them without a config (tests, the implicit route); the fields named otherwise than their key.
MODEL = {"job": (JobConfig,), "kafka": (KafkaConfig,), "zookeeper": (ZooKeeperConfig,), "warehouse": (WarehouseConfig,),
         "hive": (HiveConfig, SuccessMarkerConfig, PartitioningConfig), "schema_registry": (SchemaRegistryConfig,),
         "compaction": (CompactionConfig,), "metrics": (MetricsConfig,), "retry": (RetryConfig,), "jvm": (JvmConfig,)}
FIELD_OF = {"success_markers": "enabled", "success_marker_delay_seconds": "delay_seconds", "partition_by": "source",
            "partition_timezone": "timezone", "max_open_partition_files": "max_open_files"}
TYPED = {ValueKind.INTEGER: int, ValueKind.NUMBER: float, ValueKind.BOOLEAN: boolean}


def test_the_model_s_defaults_are_the_table_s():
    differ, compared = [], 0
    for key in KEYS:
        if not isinstance(key.default, str):
            continue
        for field in (f for model in MODEL.get(str(key.section), ()) for f in fields(model)):
            if field.name == FIELD_OF.get(key.name, key.name) and field.default is not MISSING:
                compared += 1
                if TYPED.get(key.kind, str)(key.default) != field.default:
                    differ.append(f"[{key.section}] {key.name}: the table says {key.default!r}, "
                                  f"{field.name} {field.default!r}")
    assert differ == [] and compared >= 40


ONE_TABLE = """
[job]
name = j
[kafka]
bootstrap.servers = b:1
topics = a
[zookeeper]
hosts = z:1
[warehouse]
url = webhdfs://nn:9870/w
hive_location = hdfs://ns/w
[hive]
database = d
table = t
schema = {schema}
[compaction]
[metrics]
[jvm]
[retry]
[rollup per_minute]
table = per_minute
where = action = 'error'
group_by = minute(ts)
aggregates = count(*) as errors
"""
ROUTED = """
[job]
name = j
decoder = avro
[kafka]
bootstrap.servers = b:1
[zookeeper]
hosts = z:1
[warehouse]
url = file:///tmp/w
[hive]
database = d
rejected_table = rejected
[schema_registry]
url = http://registry:1
[dimension countries]
source = hive:a.b
join_key = country
columns = name
[route r]
topics = a
table = t
schema = {schema}
dimensions = countries
[rollup per_user]
route = r
table = per_user
group_by = user_id
aggregates = count(*) as events
"""
# Read from the settings handed to librdkafka, not through Section: the ETL only requires it.
READ_AS_PASSED_THROUGH = {("kafka", "bootstrap.servers")}


def test_every_declared_key_is_read_by_the_parser(tmp_path, request, monkeypatch):
    """A key declared and documented but read by no code would be a setting that does nothing."""
    import etl.config.section as section_module
    read = set()

    def recording(header: str, name: str):
        read.add((str(section_kind(header)), name))
        return declared_key(header, name)
    monkeypatch.setattr(section_module, "declared_key", recording)
    schema = request.config.rootpath / "warehouse_schema" / "events.sql"
    for number, text in enumerate((ONE_TABLE, ROUTED)):
        path = tmp_path / f"job{number}.ini"
        path.write_text(text.format(schema=schema))
        load_config(path, environ={})
    assert sorted({(str(key.section), key.name) for key in KEYS} - read - READ_AS_PASSED_THROUGH) == []
