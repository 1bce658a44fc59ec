"""[rollup <name>] sections (etl.config.rollups): what each key takes, and every refusal, each
naming its section and key; the columns checked against the table's DDL when the job starts
(etl.job.assemble.route_specs, etl.model.rollup_columns)."""
from __future__ import annotations

import re

import pytest

from etl.config import load_config
from etl.config.rollup_filter import Column, Compare, Comparison, Literal
from etl.config.rollup_terms import Aggregate, Function, GroupKey, TimeBucket
from etl.config.rollups import RollupConfig
from etl.errors import ConfigError
from etl.job.assemble import route_specs
from tests.harness.config_file import TWO_ROUTES, minimal_ini, routed_ini
from tests.harness.paths import EVENTS_SCHEMA

ERRORS_PER_MINUTE = """
[rollup errors_per_minute]
table = errors_per_minute
where = action = 'error'
group_by = minute(ts)
aggregates = count(*) as errors, sum(amount) as amount, max(ts) as last_seen
"""


def _load(tmp_path, rollups: str, routed: bool = False):
    path = tmp_path / "etl.ini"
    path.write_text(routed_ini(TWO_ROUTES + rollups) if routed else minimal_ini(EVENTS_SCHEMA, sections=rollups))
    return load_config(path)


def _refused(tmp_path, rollups: str, routed: bool = False, checked: bool = False) -> str:
    with pytest.raises(ConfigError) as raised:
        config = _load(tmp_path, rollups, routed)
        if checked:
            route_specs(config)
    return str(raised.value)


def test_a_rollup_of_the_job_s_table_is_read_into_typed_terms(tmp_path):
    config = _load(tmp_path, ERRORS_PER_MINUTE)
    assert config.rollups == (RollupConfig(
        name="errors_per_minute", table="errors_per_minute", route="",
        where=Compare(Comparison.EQ, Column("action"), Literal("error")),
        group_by=(GroupKey("ts", TimeBucket.MINUTE),),
        aggregates=(Aggregate(Function.COUNT, None, "errors"), Aggregate(Function.SUM, "amount", "amount"),
                    Aggregate(Function.MAX, "ts", "last_seen"))),)
    route_specs(config)  # its columns are the DDL's, with types its terms take


def test_a_routed_job_s_rollup_names_its_route_and_a_database_prefix_must_be_the_job_s(tmp_path):
    config = _load(tmp_path, "[rollup per_user]\nroute = orders\ntable = db.per_user\ngroup_by = user_id\n"
                             "aggregates = count(event_id) as events", routed=True)
    assert (config.rollups[0].route, config.rollups[0].table, config.rollups[0].where) == ("orders", "per_user", None)
    route_specs(config)


@pytest.mark.parametrize(("rollup", "routed", "message"), [
    ("[rollup x]\ntable = x\ngroup_by = user_id\naggregates = count(*) as n\nwehre = ok", False,
     r"\[rollup x\] wehre: unknown key; .* did you mean `where`"),
    ("[rollup x]\ntable = x\ngroup_by = user_id", False, r"\[rollup x\] aggregates: is required"),
    ("[rollup x]\ntable = x\ngroup_by = user_id\naggregates = avg(amount) as a", False,
     r"\[rollup x\] aggregates: .*each can be merged from partials \(an average is sum / count\)"),
    ("[rollup x]\ntable = x\ngroup_by = user_id\naggregates = count(*) as n\nwhere = action = ", False,
     r"\[rollup x\] where: .*"),
    ("[rollup x]\ntable = x\ngroup_by = user_id\naggregates = count(*) as user_id", False,
     r"\[rollup x\] aggregates: names 'user_id', which group_by names too"),
    ("[rollup x]\ntable = t\ngroup_by = user_id\naggregates = count(*) as n", False,
     r"\[rollup x\] table: 't' is \[hive\] table's table too"),
    ("[rollup x]\ntable = other.x\ngroup_by = user_id\naggregates = count(*) as n", False,
     r"\[rollup x\] table: .*a rollup lives in the job's database"),
    ("[rollup x]\ntable = x\ngroup_by = user_id\naggregates = count(*) as n\n"
     "[rollup y]\ntable = x\ngroup_by = user_id\naggregates = count(*) as n", False,
     r"\[rollup y\] table: 'x' is \[rollup x\]'s table too"),
    ("[rollup x]\ntable = x\nroute = orders\ngroup_by = user_id\naggregates = count(*) as n", False,
     r"\[rollup x\] route: a job without \[route\] sections rolls up its one table"),
    ("[rollup x]\ntable = x\ngroup_by = user_id\naggregates = count(*) as n", True, r"\[rollup x\] route: is required"),
    ("[rollup x]\ntable = x\nroute = nope\ngroup_by = user_id\naggregates = count(*) as n", True,
     r"\[rollup x\] route: 'nope' is no \[route\] section; the job's routes: raw, orders"),
    ("[rollup x]\ntable = x\nroute = raw\ngroup_by = user_id\naggregates = count(*) as n", True,
     r"\[rollup x\] route: \[route raw\] fills a table per topic"),
    ("[rollup x]\ntable = x\ngroup_by = user_id\naggregates = count(distinct user_id) as n", False,
     r"\[rollup x\] aggregates: .*a distinct count does not add up from partial counts"),
    ("[rollup 9-x]\ntable = x\ngroup_by = user_id\naggregates = count(*) as n", False,
     r"\[rollup 9-x\]: '9-x' is not a valid rollup name"),
    ("[rollup x]\ntable = x\ngroup_by = user_id\naggregates = count(*) as n\ntarget = postgresql://u:pw@db/x",
     False, r"\[rollup x\] target: holds a password: the INI holds no secret; put it alone in a file that "
            r"password_file names"),
    ("[rollup x]\ntable = x\ngroup_by = user_id\naggregates = count(*) as n\ntarget = mysql://db/x", False,
     r"\[rollup x\] target: a rollup's target is a PostgreSQL database"),
    ("[rollup x]\ntable = x\ngroup_by = user_id\naggregates = count(*) as n\ntarget = postgresql://db", False,
     r"\[rollup x\] target: names no database"),
    ("[rollup x]\ntable = x\ngroup_by = user_id\naggregates = count(*) as n\npassword_file = pw", False,
     r"\[rollup x\] password_file: applies only with target"),
    ("[rollup x]\ntable = x\ngroup_by = user_id\naggregates = count(*) as n\ntarget = postgresql://db/x\n"
     "password_file = no-such-file", False, r"\[rollup x\] password_file: cannot read .*no-such-file"),
])
def test_a_mistake_in_a_section_exits_2_naming_the_key(tmp_path, rollup, routed, message):
    found = _refused(tmp_path, rollup, routed)
    assert re.search(message, found), found


@pytest.mark.parametrize(("terms", "message"), [
    ("where = levle = 'ERROR'\ngroup_by = user_id\naggregates = count(*) as n",
     r"\[rollup x\] where: 'levle' is not a column of the table; its columns: event_id, .*events.sql"),
    ("group_by = minute(user_id)\naggregates = count(*) as n",
     r"\[rollup x\] group_by: minute\(user_id\): user_id is string; a time bucket takes a timestamp column"),
    ("group_by = user_id\naggregates = sum(action) as n",
     r"\[rollup x\] aggregates: sum\(action\): action is string; sum takes a number column"),
    ("group_by = user_id\naggregates = max(nope) as n", r"\[rollup x\] aggregates: 'nope' is not a column"),
    ("where = amount > 'lots'\ngroup_by = user_id\naggregates = count(*) as n",
     r"\[rollup x\] where: 'lots' cannot be compared with a column of type double"),
    ("where = ts >= 'yesterday'\ngroup_by = user_id\naggregates = count(*) as n",
     r"\[rollup x\] where: 'yesterday' cannot be compared with a column of type timestamp"),
])
def test_a_column_the_table_lacks_or_a_type_a_term_cannot_take_exits_2_when_the_job_starts(tmp_path, terms, message):
    found = _refused(tmp_path, f"[rollup x]\ntable = x\n{terms}\n", checked=True)
    assert re.search(message, found), found


def test_a_rollup_of_a_table_by_event_time_or_of_a_split_route_is_refused_as_not_built_yet(tmp_path):
    path = tmp_path / "etl.ini"
    path.write_text(minimal_ini(EVENTS_SCHEMA, hive="partition_by = column:ts",
                                sections="[rollup x]\ntable = x\ngroup_by = user_id\naggregates = count(*) as n"))
    with pytest.raises(ConfigError, match=r"\[rollup x\]: a rollup of a table partitioned by event time .* not built"):
        load_config(path)
    split = (f"[route a]\ntopics = t\nfield = action\nvalues = buy\ntable = a\nschema = {EVENTS_SCHEMA}\n"
             f"[route b]\ntopics = t\nfield = action\nvalues = *\ntable = b\nschema = {EVENTS_SCHEMA}\n")
    path.write_text(routed_ini(split + "[rollup x]\nroute = a\ntable = x\ngroup_by = user_id\n"
                                       "aggregates = count(*) as n"))
    with pytest.raises(ConfigError, match=r"\[rollup x\] route: \[route a\] takes its topics' records by a field"):
        load_config(path)


def test_a_password_in_the_target_is_refused_without_showing_it(tmp_path):
    found = _refused(tmp_path, ERRORS_PER_MINUTE + "target = postgresql://etl:pw-in-url@db/x\n")
    assert "target: holds a password" in found and "pw-in-url" not in found, found


def test_a_target_s_password_comes_from_its_file_and_never_shows(tmp_path):
    (tmp_path / "rollups.password").write_text("s3cret\n")
    config = _load(tmp_path, ERRORS_PER_MINUTE + "target = postgresql://etl@db.example.com:5433/dash?sslmode=require\n"
                                                "password_file = rollups.password\n")
    target = config.rollups[0].target
    assert target is not None and target.password == "s3cret" and target.password_file == tmp_path / "rollups.password"
    assert target.describe() == "db.example.com:5433/dash" and "s3cret" not in repr(config)
