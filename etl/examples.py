"""A worked example of a custom transform: `[job] transform = etl.examples:minute_and_country`.

It fills two columns of warehouse_schema/web_requests.sql (conf/web_requests.ini runs it):
  - minute: log_time truncated to the minute (what the analysts group by);
  - country: the country of client_ip, looked up in an IP-range table (the [dimension
    ip_ranges] source, which has no join_key and so is handed to the transform as
    lookups["ip_ranges"], pinned and broadcast like any dimension). A range lookup is not
    an equality join: the ranges are sorted by their first address and each address is
    placed with one vectorised binary search (numpy.searchsorted).
A client_ip that is not an IPv4 address rejects the record (`_reject_reason`): it goes to
<table>_rejected with its raw message. A NULL client_ip, or one in no range, leaves country
NULL.

It lives in the etl package rather than beside the configs because a transform must be
importable on every Spark executor: what is in the package is installed wherever the ETL
runs, while a module under conf/ would have to be shipped (--py-files) and put on sys.path.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from etl.rows.transform import REJECT_COLUMN

IP_RANGES = "ip_ranges"  # the dimension's name: columns ip_from, ip_to (integers, inclusive), country
_IPV4_RE = r"^\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}$"


def minute_and_country(table: pa.Table, lookups: Mapping[str, pa.Table]) -> pa.Table:
    if IP_RANGES not in lookups:
        raise KeyError(f"no [dimension {IP_RANGES}] in the config; this transform needs it (see conf/web_requests.ini)")
    minute = pc.floor_temporal(table.column("log_time"), unit="minute")
    addresses, malformed = ipv4_numbers(table.column("client_ip"))
    country = country_of(addresses, lookups[IP_RANGES])
    reason = pc.if_else(malformed, pc.binary_join_element_wise(
        "client_ip '", pc.fill_null(table.column("client_ip"), ""), "' is not an IPv4 address", ""),
        pa.scalar(None, pa.string()))
    table = table.set_column(table.schema.get_field_index("minute"), "minute", minute)
    table = table.set_column(table.schema.get_field_index("country"), "country", country)
    return table.append_column(REJECT_COLUMN, reason)


def ipv4_numbers(text: pa.ChunkedArray) -> tuple[np.ndarray, pa.Array]:
    """Each dotted address as an integer (-1 where there is none) and a mask of the malformed ones."""
    text = text.combine_chunks() if isinstance(text, pa.ChunkedArray) else text
    looks_right = pc.fill_null(pc.match_substring_regex(text, _IPV4_RE), False)
    dotted = pc.if_else(looks_right, text, "0.0.0.0")
    octets = pc.list_flatten(pc.split_pattern(dotted, ".")).cast(pa.int64()).to_numpy().reshape(-1, 4)
    in_range = (octets <= 255).all(axis=1)
    numbers = (octets[:, 0] << 24) | (octets[:, 1] << 16) | (octets[:, 2] << 8) | octets[:, 3]
    valid = looks_right.to_numpy(zero_copy_only=False) & in_range
    malformed = pc.and_(pc.is_valid(text), pa.array(~valid))
    return np.where(valid, numbers, -1), malformed


def country_of(addresses: np.ndarray, ranges: pa.Table) -> pa.Array:
    """The country of the range holding each address; NULL where none does (or address -1)."""
    if ranges.num_rows == 0:
        return pa.nulls(len(addresses), ranges.schema.field("country").type)
    starts = ranges.column("ip_from").to_numpy()
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ranges.column("ip_to").to_numpy()[order]
    slot = np.searchsorted(starts, addresses, side="right") - 1  # the last range starting at or before
    found = (addresses >= 0) & (slot >= 0) & (addresses <= ends[np.clip(slot, 0, None)])
    rows = pa.array(order[np.clip(slot, 0, None)], mask=~found)
    return ranges.column("country").take(rows)
