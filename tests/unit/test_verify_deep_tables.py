"""Which tables `etl verify --deep` reads through Hive (etl.ops.verify_deep.tables_to_read): a routed
table that no batch has created yet (its topics are still empty) is not read and is no problem; a
missing table whose folder holds committed files is one, named as such."""
from __future__ import annotations

from etl.ops.verify_deep import tables_to_read

TABLES = ("clicks", "orders", "views", "app_rejected")


def test_a_table_never_written_and_never_created_is_not_read_and_is_a_notice_only():
    found = tables_to_read("db", TABLES, exists={"clicks", "orders", "app_rejected"}.__contains__,
                           written={"clicks", "app_rejected"}.__contains__)
    assert found.present == ("clicks", "orders", "app_rejected")
    assert found.problems == []
    assert found.notices == ["table db.views does not exist yet: no committed range was written to it (its topics "
                             "had no record so far); the batch that first loads one creates it"]


def test_a_missing_table_that_holds_committed_files_is_a_problem_and_not_read():
    found = tables_to_read("db", TABLES, exists={"clicks", "app_rejected"}.__contains__,
                           written={"clicks", "orders", "app_rejected"}.__contains__)
    assert found.present == ("clicks", "app_rejected")
    assert [(p.kind, p.where) for p in found.problems] == [("missing_table", "db.orders")]
    assert "holds committed files" in found.problems[0].detail
    assert [n.split(" does not")[0] for n in found.notices] == ["table db.views"]


def test_every_table_present_is_read_in_order():
    found = tables_to_read("db", TABLES, exists=lambda table: True, written=lambda table: False)
    assert (found.present, found.problems, found.notices) == (TABLES, [], [])
