"""What `etl recover` plans to move and rewrite when a file to move out is a merged one
(etl.compaction.merge), and how `etl verify` sees rejected records that a move took out of the
tables: on the in-memory store and real Parquet files in a local folder, with the broker's
answers given (no Kafka, no Spark).

A merged file holds several ranges. Moving it out takes every one of them out of the table, so
each must be rewritten in the same repair, or the repair refused before anything moves."""
from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from etl.config import load_config
from etl.model.batch import OffsetRange
from etl.model.compaction import Relocations, compacted_folder
from etl.model.events import MovedAside
from etl.model.naming import FileRange, final_name
from etl.ops.coverage import Span
from etl.ops.job_tables import held_by_job
from etl.ops.recovery import assess
from etl.ops.repair_moves import repair_batches
from etl.ops.rejected_moves import check_moved_rejected
from etl.sink.aside import aside_path, aside_root
from etl.sink.fs import LocalFileSystem
from etl.sink.manifest import Part, RangeManifest, manifest_path, publish_manifest
from etl.sink.warehouse import Warehouse
from etl.source.topics import JobTopics, TopicRouting
from tests.harness.config_file import minimal_ini, routed_ini
from tests.harness.memory_store import MemoryStore
from tests.harness.paths import EVENTS_SCHEMA
from tests.harness.store_contract import batch, committed

HOUR = "dt=2026-01-01/hour=00"
RANGES = [(0, 20), (20, 40), (40, 60), (60, 80), (80, 100)]


@dataclass
class Broker:
    """The broker's answers recover asks for: what each partition still holds."""
    low: int = 0
    high: int = 100
    routing: TopicRouting | None = None
    topics: frozenset[str] = field(default_factory=lambda: frozenset({"t", "ev"}))

    def topics_on_broker(self) -> frozenset[str]:
        return self.topics

    def watermarks(self, partitions):
        return {tp: (self.low, self.high) for tp in partitions}

    def topic_ids(self, topics):
        return {t: None for t in topics}

    def records_at(self, wanted):
        return {}

    def job_topics(self) -> JobTopics:
        return self.routing.apply(JobTopics(("ev",)))


def write_parquet(path: str, offsets: range | list[int], ranges: list[tuple[int, int]] | None = None) -> str:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    table = pa.table({"kafka_offset": pa.array(list(offsets), pa.int64())})
    if ranges is not None:  # a merged file's footer (etl.compaction.merge)
        table = table.replace_schema_metadata({b"etl.ranges": json.dumps([list(r) for r in ranges]).encode()})
    pq.write_table(table, path)
    return path


def rejects(lo: int, hi: int) -> list[int]:
    return [o for o in range(lo, hi) if o % 7 == 0]  # every 7th record is not JSON


@pytest.fixture
def config(tmp_path):
    ini = minimal_ini(EVENTS_SCHEMA, kafka="topics = t").replace("url = file:///tmp/w", f"url = file://{tmp_path}/w")
    (tmp_path / "job.ini").write_text(ini)
    return load_config(tmp_path / "job.ini")


@pytest.fixture
def store():
    found = MemoryStore()
    found.session.acquire_lock()
    committed(found, batch(ranges=(OffsetRange("t", 0, 0, 100, None),)))
    return found


def one_table(config, store, lost: tuple[int, int] | None):
    """Five ranges of 20 records in one hour; the rejected table's hour compacted into one file;
    the main file of `lost` gone."""
    warehouse = Warehouse.of(config)
    merged_folder = compacted_folder(HOUR, 1)
    warehouse = warehouse.with_relocations(Relocations(rejected={HOUR: merged_folder}))
    main = {r: posixpath.join(warehouse.main_dir(HOUR), final_name("t", 0, *r)) for r in RANGES}
    for r, path in main.items():
        if r != lost:
            write_parquet(path, range(*r))
    merged = write_parquet(posixpath.join(warehouse.rejected_root, merged_folder, final_name("t", 0, 0, 100)),
                           rejects(0, 100), RANGES)
    return warehouse, main, merged


def found_by(config, store, warehouse, kafka=None, accept_loss=False):
    fs = LocalFileSystem()
    return assess(config, store, kafka or Broker(), held_by_job(fs, config, store, warehouse), fs,
                  Warehouse.of(config), accept_loss)


def test_a_lost_file_beside_a_merged_rejected_file_rewrites_every_range_the_merged_file_holds(config, store):
    warehouse, main, merged = one_table(config, store, lost=(40, 60))
    found = found_by(config, store, warehouse)
    assert found.problems == []
    # The merged rejected file goes, so every range it holds is rewritten whole: their main files go too.
    assert found.moving == sorted([merged, *(path for r, path in main.items() if r != (40, 60))])
    assert found.rewrite == [Span("t", 0, 0, 100, None)] and found.lost == []


@pytest.mark.parametrize("accept_loss", [False, True])
def test_a_range_of_the_merged_file_that_kafka_no_longer_holds_refuses_before_anything_moves(config, store,
                                                                                            accept_loss):
    warehouse, main, merged = one_table(config, store, lost=(40, 60))
    found = found_by(config, store, warehouse, Broker(low=20), accept_loss)
    refusals = [p for p in found.problems if p.kind == "merged_not_in_kafka"]
    assert len(refusals) == 1, found.problems
    assert refusals[0].where == merged and "t[0] [0, 20)" in refusals[0].detail, refusals[0].describe()


def test_a_healthy_job_with_a_merged_rejected_file_has_nothing_to_repair(config, store):
    warehouse, _, _ = one_table(config, store, lost=None)
    found = found_by(config, store, warehouse)
    assert (found.problems, found.moving, found.rewrite, found.actions) == ([], [], [], [])


def damaged_by_an_earlier_recover(config, store):
    """What `etl recover` of earlier releases left: it moved the merged rejected file out and
    rewrote only the lost range, so the rejected records of the four others are gone."""
    warehouse, main, merged = one_table(config, store, lost=None)
    at = "2026-01-02T00:00:00+00:00"
    aside = aside_path(warehouse.fs_root, aside_root(warehouse.fs_root, config.job.name, at), merged)
    Path(aside).parent.mkdir(parents=True)
    Path(merged).rename(aside)
    write_parquet(posixpath.join(warehouse.rejected_dir("dt=2026-01-02/hour=00"), final_name("t", 0, 40, 60)),
                  rejects(40, 60))
    store.operator.record_event(MovedAside(at, "op", "etl recover", ((merged, aside),)))
    return warehouse, main


def test_verify_names_each_range_whose_rejected_records_a_move_took_out_of_the_table(config, store):
    warehouse, _ = damaged_by_an_earlier_recover(config, store)
    fs = LocalFileSystem()
    held = held_by_job(fs, config, store, warehouse)
    problems = check_moved_rejected(fs, warehouse, held.whole, store.offsets.committed_offsets(),
                                    store.operator.events())
    assert [(p.kind, p.where) for p in problems] == [("missing_rejected", f"t[0] [{lo}, {hi})")
                                                    for lo, hi in RANGES if lo != 40], problems


def test_recover_rewrites_the_ranges_whose_rejected_records_a_move_took_out(config, store):
    warehouse, main = damaged_by_an_earlier_recover(config, store)
    found = found_by(config, store, warehouse)
    assert found.problems == []
    assert found.moving == sorted(path for r, path in main.items() if r != (40, 60))
    assert found.rewrite == [Span("t", 0, 0, 40, None), Span("t", 0, 60, 100, None)]


def test_a_range_moved_out_whole_and_rewritten_is_not_reported(config, store):
    """The rewrite of a range moved out whole (main and rejected) may reject fewer records (a
    fixed decoder): its rejected file need not come back."""
    warehouse, main, merged = one_table(config, store, lost=None)
    at = "2026-01-02T00:00:00+00:00"
    root = aside_root(warehouse.fs_root, config.job.name, at)
    moves = tuple((path, aside_path(warehouse.fs_root, root, path)) for path in [merged, *main.values()])
    for source, target in moves:
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        Path(source).rename(target)
    for r in RANGES:
        write_parquet(posixpath.join(warehouse.main_dir("dt=2026-01-02/hour=00"), final_name("t", 0, *r)), range(*r))
    store.operator.record_event(MovedAside(at, "op", "etl recover", moves))
    fs = LocalFileSystem()
    held = held_by_job(fs, config, store, warehouse)
    assert check_moved_rejected(fs, warehouse, held.whole, store.offsets.committed_offsets(),
                                store.operator.events()) == []


# -- a topic split by a field among two tables, its clicks table and rejected table compacted ----
SPLIT = f"""[route clicks]
topics = ev
field = action
values = click
table = clicks
schema = {EVENTS_SCHEMA}
[route views]
topics = ev
field = action
values = *
table = views
schema = {EVENTS_SCHEMA}
"""


@pytest.fixture
def routed(tmp_path):
    ini = routed_ini(SPLIT).replace("url = file:///tmp/w", f"url = file://{tmp_path}/w")
    (tmp_path / "routed.ini").write_text(ini)
    return load_config(tmp_path / "routed.ini")


def test_a_split_topics_part_lost_beside_merged_parts_rewrites_every_range_in_every_table(routed):
    store = MemoryStore()
    store.session.acquire_lock()
    ranges = RANGES[:3]
    committed(store, batch(ranges=(OffsetRange("ev", 0, 0, 60, None),), tables={"ev": ["clicks", "views"]}))
    fs, folder = LocalFileSystem(), compacted_folder(HOUR, 1)
    warehouse = Warehouse.of(routed).with_relocations(Relocations(rejected={HOUR: folder},
                                                                  tables={"clicks": {HOUR: folder}}))
    clicks, views = warehouse.for_table("clicks"), warehouse.for_table("views")
    merged_clicks = write_parquet(posixpath.join(clicks.table_root, folder, final_name("ev", 0, 0, 60)),
                                  [o for o in range(60) if o % 2], ranges)
    merged_rejected = write_parquet(posixpath.join(warehouse.rejected_root, folder, final_name("ev", 0, 0, 60)),
                                    rejects(0, 60), ranges)
    view_parts = {r: posixpath.join(views.main_dir(HOUR), final_name("ev", 0, *r)) for r in ranges}
    manifests = {}
    for r in ranges:
        if r != (20, 40):  # the views part of [20, 40) deleted by hand
            write_parquet(view_parts[r], [o for o in range(*r) if not o % 2])
        manifests[r] = manifest_path(warehouse.rejected_root, "ev", 0, *r)
        Path(manifests[r]).parent.mkdir(parents=True, exist_ok=True)
        assert publish_manifest(fs, manifests[r], RangeManifest("ev", 0, *r, (Part(HOUR, 10, 0, "clicks"),
                                                                               Part(HOUR, 10, 0, "views"))))
    routing = TopicRouting(routed.routes, routed.hive.rejected_table, lambda: ["ev"])
    found = assess(routed, store, Broker(routing=routing), held_by_job(fs, routed, store, warehouse), fs,
                   Warehouse.of(routed))
    assert found.problems == []
    assert found.moving == sorted([merged_clicks, merged_rejected, view_parts[(0, 20)], view_parts[(40, 60)],
                                   *manifests.values()])
    assert found.rewrite == [Span("ev", 0, 0, 60, None)]


# -- where a repair writes: the partitions its ranges came from -------------------------------
def test_a_repair_rewrites_each_range_into_the_partition_it_came_from():
    h22, h23 = "dt=2026-01-01/hour=22", "dt=2026-01-01/hour=23"
    origins = {FileRange("t", 0, 0, 20): h22, FileRange("t", 0, 20, 40): h22, FileRange("t", 0, 60, 80): h23,
               FileRange("u", 0, 0, 20): h23}
    batches = repair_batches([Span("t", 0, 0, 100, None), Span("u", 0, 5, 10, None)], origins, cap=15,
                             committed={("t", 0): 100, ("u", 0): 30})
    assert batches == [
        ({"dt": "2026-01-01", "hour": "22"}, [OffsetRange("t", 0, 0, 15, 100), OffsetRange("t", 0, 15, 20, 100),
                                              OffsetRange("t", 0, 20, 35, 100), OffsetRange("t", 0, 35, 40, 100)]),
        ({"dt": "2026-01-01", "hour": "23"}, [OffsetRange("t", 0, 60, 75, 100), OffsetRange("t", 0, 75, 80, 100),
                                              OffsetRange("u", 0, 5, 10, 30)]),
        # a file deleted by hand with no rejected file left: where it was is not known, so the repair's own hour
        (None, [OffsetRange("t", 0, 40, 55, 100), OffsetRange("t", 0, 55, 60, 100),
                OffsetRange("t", 0, 80, 95, 100), OffsetRange("t", 0, 95, 100, 100)])]
