"""A rollup's filter applied to rows (etl.rows.rollup_filter_eval), with SQL's NULL logic: each
case checked against the rows a plain Python reading of the same filter keeps."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest

from etl.config.rollup_filter import parse_filter
from etl.rows.rollup_filter_eval import rows_kept

UTC = dt.timezone.utc
ROWS = pa.table({
    "level": ["ERROR", "INFO", None, "ERROR", "WARN"],
    "status": pa.array([500, 200, 503, None, 404], pa.int32()),
    "latency": [1.5, None, 0.25, 3.0, 2.0],
    "ok": [False, True, None, False, True],
    "ts": pa.array([dt.datetime(2026, 11, 29, 10, m, tzinfo=UTC) for m in (0, 15, 30, 45, 59)],
                   pa.timestamp("ms", tz="UTC")),
    "amount": pa.array([Decimal("1.50"), Decimal("2.00"), None, Decimal("0.10"), Decimal("9.99")],
                       pa.decimal128(10, 2)),
})


@pytest.mark.parametrize("text, kept", [
    ("level = 'ERROR'", [0, 3]),
    ("level != 'ERROR'", [1, 4]),  # NULL != 'ERROR' is unknown: not kept, as in Hive
    ("not level = 'ERROR'", [1, 4]),
    ("level is null", [2]),
    ("level is not null and status >= 500", [0]),
    ("status >= 500 or latency > 2.5", [0, 2, 3]),
    ("status in (200, 404)", [1, 4]),
    ("status not in (200, 404)", [0, 2]),  # NULL not in (...) is unknown
    ("ok = true", [1, 4]),
    ("latency < 2", [0, 2]),
    ("amount >= 1.5", [0, 1, 4]),
    ("ts >= '2026-11-29 10:30:00' and ts < '2026-11-29 10:59:00'", [2, 3]),
    ("(level = 'ERROR' or level = 'WARN') and not status = 404", [0]),
    ("1 = 1", [0, 1, 2, 3, 4]),
    ("1 = 2", []),
    ("ts >= '2026-11-29T11:30:00+01:00'", [2, 3, 4]),  # an offset named: 10:30 UTC
    ("ts < '2026-11-29T10:15:00Z'", [0]),
])
def test_rows_kept_follow_sql_null_logic(text, kept):
    mask = rows_kept(ROWS, parse_filter(text))
    assert [i for i, keep in enumerate(mask.to_pylist()) if keep] == kept


def test_an_empty_chunk_keeps_nothing_and_a_literal_of_the_wrong_kind_is_named():
    assert rows_kept(ROWS.slice(0, 0), parse_filter("level = 'ERROR'")).to_pylist() == []
    with pytest.raises(ValueError, match=r"'many' cannot be compared with a column of type int32"):
        rows_kept(ROWS, parse_filter("status = 'many'"))
