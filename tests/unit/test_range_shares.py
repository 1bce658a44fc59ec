"""A range's chunk as each table's rows (etl.job.range_shares): whole for one target, each
table's share of a split in offset order, the records no table takes as rejected rows naming no
route, a route's own rejects naming it; rows placed by event time per share."""
from __future__ import annotations

import datetime as dt

from etl.job.range_shares import RangeShares, share_targets
from tests.harness.routed_event import chunk, event_task, routed_config

RECORDS = [{"event_id": 0, "action": "click", "ts": "2026-11-26T08:10:00Z"},
           {"event_id": 1, "action": "view", "ts": "2026-11-26T09:10:00Z"},
           {"event_id": 2, "action": "buy", "ts": "2026-11-26T09:20:00Z"},
           {"event_id": "bad", "action": "view", "ts": "2026-11-26T09:30:00Z"},
           {"event_id": 4, "action": "click", "ts": "2026-11-26T10:10:00Z"}]


def _ms(hour: int) -> int:
    return int(dt.datetime(2026, 11, 26, hour, tzinfo=dt.timezone.utc).timestamp() * 1000)


def test_one_target_gets_the_chunk_whole(tmp_path):
    _batch, _tables, task = event_task(routed_config(tmp_path), topic="orders", offsets=(0, 5))
    [target] = share_targets(task)
    assert (target.table, target.table_root.endswith("/db.db/orders")) == ("", True)
    shares = RangeShares(task, {}, task.placing.placement)
    shared, refused = shares.process(chunk(RECORDS))
    [(got, rows)] = shared
    assert got == target and refused is None
    assert rows.kept.column("kafka_offset").to_pylist() == [0, 1, 2, 4]
    assert rows.rejected.num_rows == 1


def test_a_split_gives_each_table_its_share_in_offset_order_and_places_it(tmp_path):
    _batch, _tables, task = event_task(routed_config(tmp_path), offsets=(0, 5))
    assert [(t.table, t.table_root.rsplit("/", 1)[-1]) for t in share_targets(task)] == [("clicks", "clicks"),
                                                                                         ("views", "views")]
    shares = RangeShares(task, {}, task.placing.placement)
    shared, refused = shares.process(chunk(RECORDS))
    kept = {t.table: rows.kept.column("kafka_offset").to_pylist() for t, rows in shared}
    assert kept == {"clicks": [0, 4], "views": [1]}
    placed = {t.table: rows.placed.keys.to_pylist() for t, rows in shared}
    assert placed["clicks"] == [_ms(8), _ms(10)]
    views = dict((t.table, rows) for t, rows in shared)["views"]
    assert views.rejected.column("error").to_pylist()[0].startswith("[route views] field 'event_id'")
    assert refused.column("kafka_offset").to_pylist() == [2]
    assert refused.column("error").to_pylist()[0].startswith("no route takes action = 'buy'")
    assert (shares.unmatched(), shares.ignored_fields()) == ({}, {})


def test_an_empty_chunk_gives_no_share(tmp_path):
    _batch, _tables, task = event_task(routed_config(tmp_path), offsets=(0, 5))
    assert RangeShares(task, {}, task.placing.placement).process(chunk([])) == ([], None)
