"""`etl compact`'s reach, read from the imports (tests/unit/test_import_layers.py's graph): a
compaction reads no Kafka and writes no batch, so the command imports nothing of the job, the
source or the rows, and the compaction room nothing of the job above it."""
from __future__ import annotations

from tests.unit.test_import_layers import import_graph, room_of


def reach(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo += graph.get(module, ())
    return seen


def test_etl_compact_builds_no_kafka_client_and_no_writer_spec():
    rooms = {room_of(module) for module in reach(import_graph(), "etl.ops.compact")}
    assert rooms & {"job", "source", "rows"} == set()
    assert "compaction" in rooms


def test_the_compaction_room_knows_no_batch_state_machine():
    graph = import_graph()
    compaction = [m for m in graph if room_of(m) == "compaction"]
    assert compaction and not any(room_of(t) in {"job", "ops"} for m in compaction for t in reach(graph, m))
