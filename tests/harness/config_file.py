"""The one INI writer for the job, used by the tests' write_config fixture, scripts/soak.py and
the benchmark.

Callers used to write their own INI and had drifted apart (ZooKeeper session timeout 10 or 4
seconds, max rejected ratio 0.5 or 0.01, ...): those values are now parameters without a
default, so each caller says which it wants.
"""
from __future__ import annotations

import configparser
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from tests.harness.paths import EVENTS_SCHEMA
from tests.harness.stack import Stack

Sections = Mapping[str, Mapping[str, object] | None]


@dataclass(frozen=True)
class JobTuning:
    """The values the callers of the old writers disagreed on: each caller passes its own."""

    session_timeout_seconds: float  # [zookeeper]: 10 in the tests and the bench, 4 in the soak
    max_rejected_ratio: float  # [job]: 0.5 in the tests and the soak, 0.01 in the bench
    fetch_timeout_seconds: float = 20  # [kafka]: 30 in the bench
    retry_max_wait_seconds: float = 1  # [retry]: 2 in the bench
    parallelism: int = 2  # [spark] local[P] and shuffle partitions
    max_records_per_partition: int = 1_000_000
    decoder: str = "json"


def job_sections(stack: Stack, *, job_name: str, zk_root: str, warehouse_dir: Path, table: str,
                 tuning: JobTuning, database: str = "etl_test", schema: Path = EVENTS_SCHEMA) -> dict:
    """The INI's sections as dicts (no [kafka] topics: the caller names them)."""
    return {
        "job": {
            "name": job_name,
            "max_records_per_partition": str(tuning.max_records_per_partition),
            "starting_offsets": "earliest",
            "on_offset_out_of_range": "fail",
            "max_rejected_ratio": str(tuning.max_rejected_ratio),
            "decoder": tuning.decoder,
        },
        "kafka": {"bootstrap.servers": stack.kafka_bootstrap,
                  "fetch_timeout_seconds": _number(tuning.fetch_timeout_seconds)},
        "zookeeper": {"hosts": stack.zk_hosts, "root": zk_root,
                      "session_timeout_seconds": _number(tuning.session_timeout_seconds)},
        "warehouse": {"url": f"file://{warehouse_dir}"},
        "hive": {"metastore": stack.metastore_uri, "database": database, "table": table, "schema": str(schema),
                 **file_format_for_tests()},
        "retry": {"attempts": "3", "initial_wait_seconds": "0.2",
                  "max_wait_seconds": _number(tuning.retry_max_wait_seconds)},
        "spark": {
            "spark.master": f"local[{tuning.parallelism}]",
            "spark.sql.shuffle.partitions": str(tuning.parallelism),
        },
    }


def file_format_for_tests() -> dict[str, str]:
    """[hive] format from $ETL_TEST_FILE_FORMAT (orc: the integration tests on ORC tables; CI
    leaves it unset, the default, Parquet). A test that names the format in its config wins."""
    chosen = os.environ.get("ETL_TEST_FILE_FORMAT")
    return {"format": chosen} if chosen else {}


def _number(value: float) -> str:
    """10 -> "10", 0.5 -> "0.5": as the old writers spelled them."""
    return str(int(value)) if float(value).is_integer() else str(value)


def with_overrides(sections: dict, overrides: Sections) -> dict:
    """Each override is a section: a dict whose values replace or add keys (None removes the
    key), or None to drop the whole section."""
    merged = {name: dict(values) for name, values in sections.items()}
    for section, values in overrides.items():
        if values is None:
            merged.pop(section, None)
            continue
        target = merged.setdefault(section, {})
        for key, value in values.items():
            if value is None:
                target.pop(key, None)
            else:
                target[key] = str(value)
    return merged


def write_ini(path: Path, sections: Mapping[str, Mapping[str, str]]) -> Path:
    parser = configparser.ConfigParser(interpolation=None, delimiters=("=",))
    parser.optionxform = str  # keep the case of Kafka and Spark keys
    parser.read_dict(sections)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        parser.write(f)
    return path


def write_config(path: Path, stack: Stack, *, job_name: str, zk_root: str, warehouse_dir: Path, table: str,
                 tuning: JobTuning, database: str = "etl_test", schema: Path = EVENTS_SCHEMA,
                 **overrides: Mapping[str, object] | None) -> Path:
    """Write the job's INI to `path`; keyword sections override keys (see with_overrides)."""
    sections = job_sections(stack, job_name=job_name, zk_root=zk_root, warehouse_dir=warehouse_dir, table=table,
                            tuning=tuning, database=database, schema=schema)
    return write_ini(path, with_overrides(sections, overrides))


_MINIMAL_INI = """[job]
name = j1
{job}
[kafka]
bootstrap.servers = 127.0.0.1:9092
{kafka}
[zookeeper]
hosts = 127.0.0.1:2181
[warehouse]
url = file:///tmp/w
[hive]
database = db
{hive}
{sections}
"""


def minimal_ini(schema: Path | str, job: str = "", kafka: str = "topics = a", sections: str = "",
                hive: str = "") -> str:
    """The smallest valid job INI, as text, for the unit tests of the config (nothing connects
    anywhere): `job`, `kafka` and `hive` are lines added to those sections, `sections` is appended."""
    return _MINIMAL_INI.format(job=job, kafka=kafka, hive=f"table = t\nschema = {schema}\n{hive}", sections=sections)


# Two routes, as the unit tests of routes use them: a table per app.* topic, and two topics into one table.
TWO_ROUTES = f"""[route raw]
topics_regex = app[.].*
table = raw_{{topic}}
schema = {EVENTS_SCHEMA}
[route orders]
topics = orders, refunds
table = orders
schema = {EVENTS_SCHEMA}
"""


def routed_ini(sections: str, job: str = "", kafka: str = "", hive: str = "rejected_table = rejects") -> str:
    """The smallest job INI with [route] sections (`sections`, appended), as text: [hive] names no
    table, only `hive`'s lines (its rejected table)."""
    return _MINIMAL_INI.format(job=job, kafka=kafka, hive=hive, sections=sections)
