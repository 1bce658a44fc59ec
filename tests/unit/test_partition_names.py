"""Partition names at the edges of the accepted years (0001-01-02 .. 9999-12-30 UTC): zero-padded,
sortable as text, parsed back to their window; and names from before the padding (`dt=1-01-02`)
still read, so that nothing written by an older release stops a run."""
from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from etl.model.partitioning import Granularity, TimePartitioner, legacy_path, padded_path, padded_values

UTC = dt.timezone.utc
HOURLY = TimePartitioner(Granularity.HOUR, "UTC")
DAILY = TimePartitioner(Granularity.DAY, "UTC")

EDGES = [(dt.datetime(1, 1, 2, 5, 30), "0001-01-02", "05"), (dt.datetime(999, 12, 31, 23, 0), "0999-12-31", "23"),
         (dt.datetime(1000, 1, 1, 0, 0), "1000-01-01", "00"), (dt.datetime(9999, 12, 30, 23, 59), "9999-12-30", "23")]


@pytest.mark.parametrize("wall, day, hour", EDGES)
def test_names_are_zero_padded_and_parse_back_to_their_window(wall, day, hour):
    assert HOURLY.values_of_wall(wall) == {"dt": day, "hour": hour}
    assert DAILY.values_of_wall(wall) == {"dt": day}
    window = HOURLY.window({"dt": day, "hour": hour})
    assert window.start == wall.replace(minute=0, tzinfo=UTC)
    assert window.end - window.start == dt.timedelta(hours=1)
    assert HOURLY.values_of_key(HOURLY.key_of({"dt": day, "hour": hour})) == {"dt": day, "hour": hour}


@pytest.mark.parametrize("wall, day, hour", EDGES)
def test_the_vectorised_path_names_the_same_partition(wall, day, hour):
    times = pa.array([wall], pa.timestamp("ms"))
    assert [HOURLY.values_of_key(k) for k in HOURLY.wall_starts(times).to_pylist()] == [{"dt": day, "hour": hour}]
    assert [DAILY.values_of_key(k) for k in DAILY.wall_starts(times).to_pylist()] == [{"dt": day}]


def test_names_sort_as_their_times_do():
    walls = [dt.datetime(1, 1, 2), dt.datetime(9, 3, 1), dt.datetime(99, 1, 1), dt.datetime(792, 2, 27),
             dt.datetime(999, 12, 31), dt.datetime(1000, 1, 1), dt.datetime(2026, 11, 25), dt.datetime(9999, 12, 30)]
    names = [DAILY.values_of_wall(w)["dt"] for w in walls]
    assert sorted(names) == names
    # what a range query on dt selects is what the times say
    assert [n for n in names if "0001-01-01" <= n < "1000-01-01"] == names[:5]


@pytest.mark.parametrize("legacy, padded", [("dt=1-01-02/hour=05", "dt=0001-01-02/hour=05"),
                                            ("dt=792-02-27", "dt=0792-02-27"), ("dt=99-01-01", "dt=0099-01-01")])
def test_names_from_before_the_padding_still_read_and_map_to_the_padded_name(legacy, padded):
    values = dict(part.split("=", 1) for part in legacy.split("/"))
    partitioner = HOURLY if "hour" in values else DAILY
    assert partitioner.window(values) == partitioner.window(padded_values(values))
    assert padded_path(legacy) == padded and padded_path(padded) == padded
    assert legacy_path(padded) == legacy and legacy_path(legacy) == legacy


def test_names_that_are_no_date_are_still_refused():
    for bad in ("20261-01-01", "2026-1-01", "x-01-01", ""):
        with pytest.raises(ValueError):
            DAILY.window({"dt": bad})
    assert legacy_path("dt=2026-11-25/hour=10") == "dt=2026-11-25/hour=10"
    for other in (".", "_etl_ranges/t+0", "", "dt=x/hour=1"):  # folders that are no partition: as they are
        assert padded_path(other) == other and legacy_path(other) == other
