"""What a rollup groups by and what it adds up (`[rollup <name>] group_by = ...` and
`aggregates = ...`, etl.config.rollups), parsed once into typed terms:

    group_by   = minute(log_time), level
    aggregates = count(*) as errors, sum(bytes) as bytes, max(latency_ms) as slowest

- A group key is a column, or a time bucket of one: minute(c), hour(c) or day(c).
- An aggregate is count(*), count(c), sum(c), min(c) or max(c), each named by `as <name>`. Each
  can be merged: a partial per partition-batch, then a sum of counts and sums, a min of minimums
  and a max of maximums, gives the same value as one pass over every row.

A mistake is a ValueError naming the term and what is expected.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from etl.config.model import HIVE_NAME_RE

_CALL_RE = re.compile(r"^(?P<function>[A-Za-z_]+)\s*\(\s*(?P<argument>\*|[A-Za-z_][A-Za-z0-9_]*)\s*\)$")
_AGGREGATE_RE = re.compile(r"^(?P<call>.+?)\s+as\s+(?P<name>\S+)$", re.IGNORECASE)


class TimeBucket(Enum):
    MINUTE = "minute"
    HOUR = "hour"
    DAY = "day"


class Function(Enum):
    """Each merges: partials combined with `merged_by` equal one pass over all the rows."""

    COUNT = "count"
    SUM = "sum"
    MIN = "min"
    MAX = "max"

    @property
    def merged_by(self) -> "Function":
        return Function.SUM if self in (Function.COUNT, Function.SUM) else self


@dataclass(frozen=True)
class GroupKey:
    column: str
    bucket: TimeBucket | None = None  # None: the column's own values

    @property
    def name(self) -> str:
        """The rollup table's column: the column's name, or `<column>_<bucket>`."""
        return self.column if self.bucket is None else f"{self.column}_{self.bucket.value}"


@dataclass(frozen=True)
class Aggregate:
    function: Function
    column: str | None  # None: count(*)
    name: str  # the rollup table's column


def parse_group_by(text: str) -> tuple[GroupKey, ...]:
    keys = tuple(_group_key(term) for term in _terms(text, "group_by"))
    _unique([key.name for key in keys], "group key")
    return keys


def parse_aggregates(text: str) -> tuple[Aggregate, ...]:
    aggregates = tuple(_aggregate(term) for term in _terms(text, "aggregates"))
    _unique([aggregate.name for aggregate in aggregates], "aggregate name")
    return aggregates


def _terms(text: str, what: str) -> list[str]:
    terms = [term.strip() for term in text.split(",")]
    if not any(terms):
        raise ValueError(f"{what} names nothing")
    empty = [index + 1 for index, term in enumerate(terms) if not term]
    if empty:
        raise ValueError(f"term {empty[0]} is empty (a comma too many?)")
    return terms


def _group_key(term: str) -> GroupKey:
    call = _CALL_RE.match(term)
    if call is None:
        return GroupKey(_column(term, term))
    buckets = {bucket.value: bucket for bucket in TimeBucket}
    function, argument = call["function"].lower(), call["argument"]
    if function not in buckets:
        raise ValueError(f"{term!r}: a group key is a column or {', '.join(f'{b}(column)' for b in buckets)}")
    return GroupKey(_column(argument, term), buckets[function])


def _aggregate(term: str) -> Aggregate:
    named = _AGGREGATE_RE.match(term)
    if named is None:
        raise ValueError(f"{term!r}: an aggregate is named, as in `count(*) as errors`")
    if re.match(r"(?i)count\s*\(\s*distinct\s", named["call"].strip()):
        raise ValueError(f"{term!r}: a distinct count does not add up from partial counts, and a mergeable "
                         f"approximate one is not built (docs/rollups.md says why)")
    call = _CALL_RE.match(named["call"].strip())
    functions = {function.value: function for function in Function}
    if call is None or call["function"].lower() not in functions:
        raise ValueError(f"{term!r}: an aggregate is {', '.join(f'{f}(column)' for f in functions)} or count(*): "
                         f"each can be merged from partials (an average is sum / count)")
    function, argument = functions[call["function"].lower()], call["argument"]
    if argument == "*" and function is not Function.COUNT:
        raise ValueError(f"{term!r}: only count takes *")
    column = None if argument == "*" else _column(argument, term)
    return Aggregate(function, column, _column(named["name"], term))


def _column(name: str, term: str) -> str:
    if not HIVE_NAME_RE.match(name.lower()):
        raise ValueError(f"{term!r}: {name!r} is not a Hive column name")
    return name.lower()


def _unique(names: list[str], what: str) -> None:
    seen = set()
    for name in names:
        if name in seen:
            raise ValueError(f"two terms make the {what} {name!r}: each is a column of the rollup table")
        seen.add(name)
