"""Unit tests: no services. Nothing here may need the local stack, ZooKeeper, Kafka, Spark or an
`etl` process; `pytest tests/unit` runs in seconds on a bare checkout with the venv. Tests that
need the stack live in tests/integration (its conftest.py holds their fixtures)."""
