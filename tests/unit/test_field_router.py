"""One topic's records split among its routes' tables by a field (etl.rows.routing)."""
from __future__ import annotations

import pytest

from etl.model.routes import TopicSplit
from etl.model.schema import Column, TableSchema
from etl.rows.decoders.json import JsonDecoder
from etl.rows.routing import FieldRouter

RECORDS = [b'{"kind":"click","n":1}', b'{"kind":"view"}', b'not json', b'{"n":2}', b'{"kind":"buy"}',
           b'{"kind":"tap"}', None, b'{"kind":null}']


def _router(rest: str | None = None, hive_type: str = "string") -> FieldRouter:
    split = TopicSplit("kind", {"click": "clicks", "tap": "clicks", "view": "views"}, rest)
    return FieldRouter(split, JsonDecoder(TableSchema((Column("kind", hive_type),), ())))


def test_each_listed_value_goes_to_its_table_and_every_other_record_is_rejected_with_its_reason():
    routed = _router().route(RECORDS)
    assert {t: rows.to_pylist() for t, rows in routed.by_table.items()} == {"clicks": [0, 5], "views": [1]}
    reasons = dict(routed.rejected)
    assert sorted(reasons) == [2, 3, 4, 6, 7]
    assert reasons[3] == reasons[7] == "kind is missing, and no route takes the rest (values = *)"
    assert reasons[4] == "no route takes kind = 'buy' (routes take: click, tap, view)"
    assert reasons[6] == "empty message"


def test_the_rest_takes_every_unlisted_value_and_a_missing_field_but_not_an_unreadable_record():
    routed = _router(rest="other").route(RECORDS)
    assert {t: rows.to_pylist() for t, rows in routed.by_table.items()} == {
        "clicks": [0, 5], "views": [1], "other": [3, 4, 7]}
    assert [index for index, _ in routed.rejected] == [2, 6]


def test_a_number_is_compared_as_the_text_the_config_lists():
    split = TopicSplit("code", {"7": "sevens"}, "others")
    router = FieldRouter(split, JsonDecoder(TableSchema((Column("code", "int"),), ())))
    routed = router.route([b'{"code":7}', b'{"code":8}', b'{"code":"7"}'])
    assert {t: rows.to_pylist() for t, rows in routed.by_table.items()} == {"sevens": [0], "others": [1]}
    assert [index for index, _ in routed.rejected] == [2]  # a string where the probe reads an int


def test_a_probe_of_another_field_is_refused():
    with pytest.raises(ValueError, match="not the one field 'kind'"):
        FieldRouter(TopicSplit("kind", {"a": "t"}), JsonDecoder(TableSchema((Column("other", "string"),), ())))


def test_a_number_or_boolean_in_a_field_read_as_text_is_routed_by_its_json_text():
    # values = 7, true, 1.5 with the field declared string (or not a column): as the message writes
    # them, so 1.0 is not 1 and 1e2 not 100; a string "7" is the same text as the number 7.
    split = TopicSplit("code", {"7": "sevens", "true": "trues", "1.5": "halves"}, None)
    router = FieldRouter(split, JsonDecoder(TableSchema((Column("code", "string"),), ())))
    routed = router.route([b'{"code":7}', b'{"code": true, "x": [1]}', b'{"code":1.5}', b'{"code":"7"}',
                           b'{"code":1.0}', b'{"code":false}', b'{"code":[7]}', b'{"code":7,"code":7}',
                           b'\xef\xbb\xbf{"code":7}', b'{"code":7'])
    assert {t: rows.to_pylist() for t, rows in routed.by_table.items()} == {
        "sevens": [0, 3, 8], "trues": [1], "halves": [2]}
    reasons = dict(routed.rejected)
    assert reasons[4] == "no route takes code = '1.0' (routes take: 7, true, 1.5)"
    assert reasons[5] == "no route takes code = 'false' (routes take: 7, true, 1.5)"
    assert reasons[6] == "field 'code': expected string, got array"
    assert reasons[7] == "field 'code': expected string, got number"  # the probe's: a repeated field is not routed
    assert sorted(reasons) == [4, 5, 6, 7, 9]  # 9 is no JSON: never routed, whatever the probe says of it
