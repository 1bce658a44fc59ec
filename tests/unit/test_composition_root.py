"""The composition root (etl.context): only a command's context constructs a client, and it
builds each one only when asked, so a command pays for nothing it does not use.

The first test reads etl/ with `ast`, as the layer test does: a call of a client's constructor
anywhere else fails it. The others need no service: ZooKeeper is a closed port, so anything
that touched it would fail the test (within a second)."""
from __future__ import annotations

import ast
import datetime as dt
from pathlib import Path

import pytest

from etl.config import load_config
from etl.context.command import CommandContext
from etl.context.job import JobContext
from etl.errors import EtlError
from etl.model.partitioning import TimePartitioner
from etl.sink.warehouse import Warehouse
from tests.harness.config_file import minimal_ini
from tests.harness.paths import EVENTS_SCHEMA
from tests.harness.ports import free_port

PACKAGE = Path(__file__).resolve().parents[2] / "etl"
# A call of any of these builds a client (or the value a client is built from: Warehouse.of).
CLIENTS = {"ZkStateStore", "KafkaMetadata", "OffsetMirror", "filesystem_for", "HiveRegistrar", "SparkStarter",
           "build_spark", "WriterSchemas", "Warehouse.of", "ThriftCatalog", "SparkCatalog"}
# Outside the context, and why.
ALLOWED = {
    # a Spark task runs on an executor, where no driver object reaches: it builds its own
    # filesystem from the config it was shipped
    ("job/tasks.py", "filesystem_for"), ("job/event_task.py", "filesystem_for"),
    ("job/route_task.py", "filesystem_for"),
}


def _called(node: ast.Call) -> str | None:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return f"{func.value.id}.{func.attr}"
    return None


def client_constructions(package: Path = PACKAGE) -> list[tuple[str, str]]:
    found = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Call) and _called(node) in CLIENTS:
                found.append((relative, _called(node)))
    return found


def test_only_a_context_constructs_a_client():
    outside = [(where, what) for where, what in client_constructions()
               if not where.startswith("context/") and (where, what) not in ALLOWED]
    assert outside == []


def test_the_contexts_construct_each_client_once():
    inside = [what for where, what in client_constructions() if where.startswith("context/")]
    # SparkStarter twice: warming Python workers or not (etl.context.job, runs_batches). HiveRegistrar
    # twice: the job's, and a routed job's per table, on the command's one metastore client, ThriftCatalog
    # or SparkCatalog (table_registrar, and existing_table for compaction).
    # WriterSchemas: the Schema Registry's, handed to the writer specs and the registry routes' tables.
    assert sorted(inside) == sorted(["ZkStateStore", "filesystem_for", "Warehouse.of", "SparkStarter",
                                     "HiveRegistrar", "OffsetMirror", "KafkaMetadata", "SparkStarter",
                                     "HiveRegistrar", "WriterSchemas", "ThriftCatalog", "SparkCatalog"])


@pytest.fixture
def config(tmp_path):
    """A job whose ZooKeeper is a closed port."""
    ini = minimal_ini(EVENTS_SCHEMA).replace("hosts = 127.0.0.1:2181",
                                             f"hosts = 127.0.0.1:{free_port()}\nsession_timeout_seconds = 1")
    (tmp_path / "job.ini").write_text(ini)
    return load_config(tmp_path / "job.ini")


def test_a_context_builds_nothing_it_is_not_asked_for(config):
    with CommandContext(config) as context:
        assert isinstance(context.warehouse, Warehouse) and context.warehouse is context.warehouse
        assert isinstance(context.partitioner, TimePartitioner)
        assert context.fs is context.fs  # built once
    # closing it touched no service: nothing was opened


def test_the_store_is_built_on_first_use_and_a_failed_connect_leaves_nothing_to_close(config):
    context = CommandContext(config)
    with pytest.raises(EtlError):
        context.store  # the closed port: ZooKeeper does not answer
    context.close()


def test_the_clock_is_the_one_handed_in(config):
    frozen = dt.datetime(2026, 11, 26, 10, 30, tzinfo=dt.timezone.utc)
    with JobContext(config, clock=lambda: frozen) as context:
        assert context.clock() == frozen


def test_a_job_context_reads_the_partitioner_from_the_ddl_until_the_writer_spec_is_built(config):
    with JobContext(config) as context:
        alone = context.partitioner  # `etl run --dry-run`: no decoder is built for it
        assert context.spec.schema.partitioner.in_zone(config.hive.partitioning.timezone) == alone
