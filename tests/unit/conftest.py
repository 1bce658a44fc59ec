"""Unit tests: no services. Nothing here may need the local stack, ZooKeeper, Kafka, Spark or an
`etl` process; `pytest tests/unit` runs in seconds on a bare checkout with the venv. Tests that
need the stack live in tests/integration (its conftest.py holds their fixtures)."""
from __future__ import annotations

import pytest

from etl.config import load_config
from tests.harness.config_file import minimal_ini
from tests.harness.schema_registry import RegistryProcess, registry_for_tests, why_no_stoppable_registry


@pytest.fixture
def schema_registry(tmp_path):
    """A Schema Registry at `.url`: a fresh test server in this process, or the real registry
    $ETL_TEST_SCHEMA_REGISTRY_URL names (shared: keep to subjects of the test's own topics).
    A test that counts requests or stops the registry takes `registry_process`."""
    with registry_for_tests(tmp_path / "schema-registry") as registry:
        yield registry


@pytest.fixture
def registry_process(tmp_path):
    """The test server in its own process, which the test may stop(), kill() and start() again
    on the same port and data; skipped when the tests are pointed at a real registry."""
    reason = why_no_stoppable_registry()
    if reason:
        pytest.skip(reason)
    with RegistryProcess(tmp_path / "schema-registry-process") as registry:
        yield registry


@pytest.fixture
def config_with(tmp_path, request):
    """load(kafka_lines): the Config of a minimal job whose [kafka] section has these lines."""
    schema = request.config.rootpath / "warehouse_schema" / "events.sql"

    def load(kafka_lines: str):
        path = tmp_path / "job.ini"
        path.write_text(minimal_ini(schema, kafka=kafka_lines))
        return load_config(path)
    return load
