"""The project's tests: `unit/` (no services), `integration/` (the real local stack), and the
packages they share, importable without pytest: `harness/` (stack, configs, Kafka, `etl`
processes, the exactly-once oracle, faults) and `perf/` (the benchmark behind scripts/bench.py)."""
