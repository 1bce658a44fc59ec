"""The rollup filter's expression language (etl.config.rollup_filter): what it parses into, the
columns it reads, and a clear message, with the position, for each kind of mistake."""
from __future__ import annotations

from decimal import Decimal

import pytest

from etl.config.rollup_filter import (And, Column, Compare, Comparison, In, IsNull, Literal, Not, Or, columns_of,
                                      parse_filter)


def test_the_seed_s_filter_and_its_precedence():
    assert parse_filter("level = 'ERROR'") == Compare(Comparison.EQ, Column("level"), Literal("ERROR"))
    # `and` binds tighter than `or`; parentheses group; keywords in any case
    assert parse_filter("a = 1 OR b = 2 and NOT c = 3") == Or((
        Compare(Comparison.EQ, Column("a"), Literal(1)),
        And((Compare(Comparison.EQ, Column("b"), Literal(2)), Not(Compare(Comparison.EQ, Column("c"), Literal(3)))))))
    assert parse_filter("(a = 1 or b = 2) and c = 3") == And((
        Or((Compare(Comparison.EQ, Column("a"), Literal(1)), Compare(Comparison.EQ, Column("b"), Literal(2)))),
        Compare(Comparison.EQ, Column("c"), Literal(3))))


@pytest.mark.parametrize("text, expected", [
    ("Status >= 500", Compare(Comparison.GE, Column("status"), Literal(500))),
    ("amount <> -1.50", Compare(Comparison.NE, Column("amount"), Literal(Decimal("-1.50")))),
    ("ok != true", Compare(Comparison.NE, Column("ok"), Literal(True))),
    ("'x' < name", Compare(Comparison.LT, Literal("x"), Column("name"))),
    ("msg = 'it''s'", Compare(Comparison.EQ, Column("msg"), Literal("it's"))),
    ("user_id is not null", IsNull(Column("user_id"), negated=True)),
    ("user_id IS NULL", IsNull(Column("user_id"))),
    ("path in ('/a', '/b')", In(Column("path"), (Literal("/a"), Literal("/b")))),
    ("code not in (1, 2,3)", In(Column("code"), (Literal(1), Literal(2), Literal(3)), negated=True)),
])
def test_each_predicate(text, expected):
    assert parse_filter(text) == expected


def test_the_columns_a_filter_reads():
    expr = parse_filter("level = 'ERROR' and (status >= 500 or Path in ('/a')) and not user_id is null and 1 = 1")
    assert columns_of(expr) == {"level", "status", "path", "user_id"}


@pytest.mark.parametrize("text, message", [
    ("", r"at character 1: expected a column or a value .*, found the end"),
    ("level =", r"at character 8: expected a column or a value .*, found the end"),
    ("level", r"at character 6: expected a comparison .*, found the end"),
    ("level = 'ERROR' status", r"at character 17: expected an end, or `and` / `or` .*, found 'status'"),
    ("(a = 1", r"at character 7: expected `\)`, found the end"),
    ("a is 1", r"at character 6: expected `null` after `is`, found '1'"),
    ("a in 1", r"at character 6: expected `\(` and the values, found '1'"),
    ("a in (1 2)", r"at character 9: expected `,` or `\)`, found '2'"),
    ("a in (b)", r"at character 7: expected a column or a value .*, found 'b'"),
    ("a = 'open", r"at character 5: a 'text' that is never closed"),
    ("a == 1", r"at character 4: expected a column or a value .*, found '='"),
    ("a = 1; drop table t", r"at character 6: ';' is not part of the language"),
    ("and = 1", r"at character 1: expected a column or a value .*, found 'and'"),
])
def test_a_mistake_says_where_and_what_was_expected(text, message):
    with pytest.raises(ValueError, match=message):
        parse_filter(text)
