"""Schema evolution's pure rules: warehouse_schema/ is the truth, a Hive table follows it by
additions only; a refused change names the column. The real thing against the metastore is
tests/integration/test_schema_evolution_job.py.
"""
from __future__ import annotations

import pytest

from etl.hive.evolution import IncompatibleSchemaChange, plan_evolution
from etl.model.schema import LINEAGE_COLUMNS, Column


HIVE = (Column("event_id", "bigint"), Column("user_id", "string")) + LINEAGE_COLUMNS


# -- the rules --------------------------------------------------------------------------------
def test_columns_added_at_the_end_are_an_addition():
    wanted = HIVE + (Column("country", "string"), Column("extra", "int"))
    evolution = plan_evolution("db.t", "t.sql", HIVE, wanted)
    assert evolution.added == (Column("country", "string"), Column("extra", "int"))
    assert evolution.columns == wanted


def test_a_column_added_between_existing_ones_is_refused_saying_where_to_put_it():
    wanted = (Column("event_id", "bigint"), Column("country", "string"), Column("user_id", "string")) + LINEAGE_COLUMNS
    with pytest.raises(IncompatibleSchemaChange, match=r"new column 'country' between existing columns .* "
                                                       r"\(before 'user_id'\).* after 'kafka_timestamp'"):
        plan_evolution("db.t", "t.sql", HIVE, wanted)


def test_an_unchanged_table_needs_nothing():
    assert not plan_evolution("db.t", "t.sql", HIVE, HIVE).is_needed


def test_a_dropped_column_is_refused_naming_it():
    with pytest.raises(IncompatibleSchemaChange, match=r"'user_id string', which t.sql no longer declares\. "
                                                       r"Dropping or renaming"):
        plan_evolution("db.t", "t.sql", HIVE, (Column("event_id", "bigint"),) + LINEAGE_COLUMNS)


def test_a_renamed_column_is_refused_with_a_guess():
    renamed = (Column("event_id", "bigint"), Column("uid", "string")) + LINEAGE_COLUMNS
    with pytest.raises(IncompatibleSchemaChange, match=r"'user_id string'.*\(renamed to 'uid'\?\)"):
        plan_evolution("db.t", "t.sql", HIVE, renamed)


@pytest.mark.parametrize("new_type", ["int", "string", "double"])
def test_a_changed_or_narrowed_type_is_refused_naming_the_column(new_type):
    changed = (Column("event_id", new_type), Column("user_id", "string")) + LINEAGE_COLUMNS
    with pytest.raises(IncompatibleSchemaChange, match=rf"column 'event_id' of Hive table db.t is bigint, but t.sql "
                                                       rf"declares it {new_type}"):
        plan_evolution("db.t", "t.sql", HIVE, changed)


def test_a_reordered_lineage_column_is_refused_naming_it():
    lineage = list(LINEAGE_COLUMNS)
    lineage[1], lineage[2] = lineage[2], lineage[1]
    with pytest.raises(IncompatibleSchemaChange, match=r"moves existing column 'kafka_offset'.*Hive has "
                                                       r"'kafka_partition' after 'kafka_topic'"):
        plan_evolution("db.t", "t.sql", HIVE, HIVE[:2] + tuple(lineage))


def test_names_compare_as_hive_does_ignoring_case():
    upper = (Column("Event_ID", "bigint"), Column("user_id", "string")) + LINEAGE_COLUMNS
    assert not plan_evolution("db.t", "t.sql", HIVE, upper).is_needed
