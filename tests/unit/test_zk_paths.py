"""ZkPaths is the job's layout in ZooKeeper, which jobs already running have written: every
path it builds is pinned here, so that routing a caller through it never renames a znode."""
import re
from pathlib import Path

from etl.state.paths import ZkPaths

STATE = Path(__file__).resolve().parents[2] / "etl" / "state"


def test_the_layout_is_the_one_jobs_have_written():
    paths = ZkPaths("/etl/", "orders")
    assert (paths.job, paths.lock, paths.owner, paths.committed) == \
        ("/etl/orders", "/etl/orders/lock", "/etl/orders/owner", "/etl/orders/committed")
    assert (paths.offsets, paths.migrated, paths.migrated_note) == \
        ("/etl/orders/offsets", "/etl/orders/offsets/~migrated", "/etl/orders/offsets/~migrated/see-committed")
    assert (paths.events, paths.event_prefix) == ("/etl/orders/events", "/etl/orders/events/event-")
    assert paths.topic("t") == "/etl/orders/offsets/t" and paths.offset("t", 3) == "/etl/orders/offsets/t/3"
    assert paths.snapshot("s-0000000004") == "/etl/orders/snapshots/s-0000000004"
    assert paths.snapshot_chunk("s-1", 2) == "/etl/orders/snapshots/s-1/offsets-00002"
    assert paths.plan(7) == "/etl/orders/plans/0000000007"
    assert paths.plan_chunk(7, 1) == "/etl/orders/plans/0000000007/ranges-00001"
    assert paths.marker_chunk(7, "markers-ab12") == "/etl/orders/plans/0000000007/markers-ab12"
    assert paths.batch(7) == "/etl/orders/batches/0000000007"
    assert paths.chunk(7, 0) == "/etl/orders/batches/0000000007/ranges-00000"
    assert paths.record_chunk(7, 0) == "/etl/orders/batches/0000000007/records-00000"
    assert paths.touched(7, 12) == "/etl/orders/batches/0000000007/partitions-00012"
    assert paths.compaction(3) == "/etl/orders/compactions/0000000003"
    assert ZkPaths.child(paths.compactions, "0000000003") == paths.compaction(3)
    assert paths.relocations == "/etl/orders/relocations"
    assert paths.table_relocations == "/etl/orders/table-relocations"
    assert paths.table_relocation("orders_a") == "/etl/orders/table-relocations/orders_a"
    assert ZkPaths.child(paths.events, "event-0000000001") == "/etl/orders/events/event-0000000001"


def test_no_other_state_module_spells_a_znode_path():
    """Each path that etl/state builds comes from ZkPaths: no `/records-` or `f"{...}/..."` elsewhere."""
    built = re.compile(r"""f["'][^"'\n]*\}/""")
    found = [f"{p.name}:{n}" for p in sorted(STATE.glob("*.py")) if p.name != "paths.py"
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if built.search(line.split("#")[0])]
    assert found == []
