"""Finishing a reset whose run died half-way (etl.job.pending_reset), on the in-memory store
(tests.harness.memory_store) and a local folder: the logic, without a ZooKeeper."""
from etl.job.pending_reset import finish_pending_reset
from etl.model.events import OffsetChange, PendingReset, Reset
from etl.sink.fs import LocalFileSystem
from tests.harness.memory_store import MemoryStore
from tests.harness.store_contract import AT, batch, committed, values


def test_a_recorded_reset_is_finished_by_the_next_lock_holder_whatever_the_files_did(tmp_path):
    (tmp_path / "table").mkdir()
    (tmp_path / "table" / "a.parquet").write_bytes(b"a")
    (tmp_path / "aside").mkdir()
    (tmp_path / "aside" / "b.parquet").write_bytes(b"b")  # moved before the run died
    moves = ((str(tmp_path / "table" / "a.parquet"), str(tmp_path / "aside" / "a.parquet")),
             (str(tmp_path / "table" / "b.parquet"), str(tmp_path / "aside" / "b.parquet")))
    died = MemoryStore()
    died.session.acquire_lock()
    committed(died, batch())
    reset = Reset(AT, "op", (OffsetChange("t", 0, 10, 0),), moves)
    died.operator.write_pending_reset(PendingReset(reset, {}))
    died.session.expire()
    nxt = died.another_run()
    nxt.session.acquire_lock()
    said = []
    finish_pending_reset(nxt, LocalFileSystem(), said.append)
    assert values(nxt) == {("t", 0): 0, ("t", 1): 5} and nxt.operator.pending_reset() is None
    assert nxt.operator.events() == [reset] and len(said) == 1
    assert sorted(p.name for p in (tmp_path / "aside").iterdir()) == ["a.parquet", "b.parquet"]
    finish_pending_reset(nxt, LocalFileSystem(), said.append)  # nothing pending: nothing happens
    assert len(said) == 1 and nxt.operator.events() == [reset]
