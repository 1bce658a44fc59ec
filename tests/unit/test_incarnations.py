"""A recreated topic's incarnations, Spark-free: their files' names, the plan that enters one, the
committed state that records them, and how verify, recover, compaction and reset tell them apart.

The scene of most tests: partition 0 of `events` was loaded as [0, 20) and [20, 30), the topic was
deleted and recreated, and the job loaded the new topic's [0, 5) after skipping on. Before
incarnations were named, the new file took the old one's offsets and the old files stood beyond the
committed offset 5, so `verify` failed until an operator moved them out by hand."""
from __future__ import annotations

import pytest

from etl.config.model import HiveFormat
from etl.compaction.plan import plan_outputs
from etl.config import JobConfig, OutOfRangePolicy
from etl.model.batch import Batch, BatchState, OffsetRange, SkippedRange
from etl.model.compaction import InputFile
from etl.model.events import Skipped, from_json, to_json
from etl.model.identity import Incarnation, incarnation_tag
from etl.model.incarnations import with_incarnations
from etl.model.naming import FileRange, final_name, named_range, parse_final_name, range_stem, temp_name
from etl.model.planner import PartitionPosition, plan_ranges
from etl.ops.coverage import check_ranges, walk_partitions
from etl.ops.inventory import Inventory, WarehouseFile
from etl.ops.recovery import _split_by_kafka
from etl.ops.reset import _backwards
from etl.model.events import OffsetChange
from etl.sink.manifest import RangeManifest, manifest_path
from etl.state.offsets_after import offsets_after
from etl.state.snapshots import CommittedState, _decode, _encode
from etl.state.znodes import CommittedOffset

TOPIC_ID = "Uq2s3Kz9Q5Wl7Nfb9sKc0A"  # as Kafka prints a topic id (base64url of its UUID)
NEW = TOPIC_ID[:11]
FOLDER = "dt=2026-11-27/hour=10"


def wfile(start: int, end: int, tag: str = "", partition: int = 0) -> WarehouseFile:
    name = final_name("events", partition, start, end, tag)
    return WarehouseFile(f"/wh/{FOLDER}/{name}", FOLDER, parse_final_name(name))


def recreated(value: int = 5, past_end: int = 30) -> CommittedOffset:
    return CommittedOffset(value, 1, 0, incarnation=NEW, past=(Incarnation("", 0, past_end),))


# -- names ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, expected", [
    # As every version before incarnations wrote them, and compaction merged them: the first incarnation's.
    ("clicks+3+00000000000000000010+00000000000000000020.parquet", FileRange("clicks", 3, 10, 20, "")),
    ("web.events-v2+0+00000000000000000000+00000000000000001000.parquet", FileRange("web.events-v2", 0, 0, 1000, "")),
    ("a+12+00000000000000000005+00000000000000000006.parquet", FileRange("a", 12, 5, 6, "")),
    # A later incarnation's: its tag after the offsets.
    (f"clicks+3+00000000000000000010+00000000000000000020+{NEW}.parquet", FileRange("clicks", 3, 10, 20, NEW)),
    ("t+0+00000000000000000000+00000000000000000005+-_aZ09xyQ-_.parquet", FileRange("t", 0, 0, 5, "-_aZ09xyQ-_")),
])
def test_names_of_every_version_parse_with_their_incarnation(name, expected):
    assert parse_final_name(name) == expected
    assert final_name(*[getattr(expected, f) for f in ("topic", "partition", "start", "end", "incarnation")]) == name
    assert expected.name_as(HiveFormat.PARQUET) == name
    orc = name.removesuffix(".parquet") + ".orc"  # a table stored as ORC: the same range, its own extension
    assert parse_final_name(orc, HiveFormat.ORC) == expected == named_range(orc) and parse_final_name(orc) is None
    assert expected.name_as(HiveFormat.ORC) == orc and parse_final_name(name, HiveFormat.ORC) is None


@pytest.mark.parametrize("name", [
    "clicks+3+00000000000000000010+00000000000000000020+short.parquet",  # not a tag's length
    "clicks+3+00000000000000000010+00000000000000000020+Uq2s3Kz9Q5W+x.parquet",
    "clicks+3+00000000000000000010+00000000000000000020+Uq2s3Kz9Q5.W.parquet",  # '.' is no tag character
    temp_name(final_name("clicks", 3, 10, 20, NEW)),
])
def test_what_is_no_committed_file_name_does_not_parse(name):
    assert parse_final_name(name) is None


def test_a_tag_that_is_not_one_is_refused_when_a_name_is_built():
    with pytest.raises(ValueError, match="not an incarnation tag"):
        final_name("clicks", 3, 10, 20, "a+b")


def test_a_new_incarnation_is_tagged_by_its_topic_ids_first_characters_or_at_random_without_one():
    assert incarnation_tag(TOPIC_ID) == "Uq2s3Kz9Q5W"
    drawn = {incarnation_tag(None) for _ in range(50)}
    assert len(drawn) == 50
    assert all(parse_final_name(final_name("t", 0, 0, 1, tag)).incarnation == tag for tag in drawn)


@pytest.mark.parametrize("printed", ["k/WTVTNOT6O2yf0KxLm1Qw", "av+/OgCxQs4eRclsDaco3g"])
def test_a_topic_id_printed_in_standard_base64_tags_its_incarnation_in_base64url(printed):
    # confluent-kafka prints a topic id in standard base64, Kafka's own tools in base64url: about
    # one id in three holds a '+' or a '/' in its first 11 characters, which no file name may carry.
    tag = incarnation_tag(printed)
    assert tag == printed[:11].replace("+", "-").replace("/", "_")
    assert parse_final_name(final_name("t", 0, 0, 1, tag)).incarnation == tag


def test_a_ranges_and_a_manifests_names_carry_the_incarnation_and_the_firsts_are_stored_as_before():
    first, later = OffsetRange("events", 0, 0, 5, 30), OffsetRange("events", 0, 0, 5, 30, NEW)
    assert first.to_json() == ["events", 0, 0, 5, 30]  # what versions before incarnations read
    assert OffsetRange.from_json(later.to_json()) == later and OffsetRange.from_json(first.to_json()) == first
    parquet = HiveFormat.PARQUET
    assert later.name_as(parquet) == final_name("events", 0, 0, 5, NEW) != first.name_as(parquet)
    assert manifest_path("/t", "events", 0, 0, 5, NEW) != manifest_path("/t", "events", 0, 0, 5)
    manifest = RangeManifest("events", 0, 0, 5, (), incarnation=NEW)
    assert manifest.file_range == later.file_range and RangeManifest.from_json(manifest.to_json()) == manifest
    assert "incarnation" not in RangeManifest("events", 0, 0, 5, ()).to_json()


# -- planning and committing ---------------------------------------------------------------------

JOB = JobConfig(name="j", on_offset_out_of_range=OutOfRangePolicy.EARLIEST)


def planned(positions, current, stored_ids, topic_ids):
    return with_incarnations(plan_ranges(positions, JOB), current, stored_ids, topic_ids)


def test_a_plan_that_skips_into_a_recreated_topic_enters_an_incarnation_tagged_by_its_topic_id():
    positions = [PartitionPosition("events", 0, 30, 0, 5, recreated="topic 'events' was deleted and recreated"),
                 PartitionPosition("events", 1, None, 0, 4)]  # a partition the old topic did not have
    plan = planned(positions, {("events", 0): ""}, {"events": "old-id"}, {"events": TOPIC_ID})
    assert [(r.partition, r.start, r.end, r.incarnation) for r in plan.ranges] == [(0, 0, 5, NEW), (1, 0, 4, "")]
    assert [s.incarnation for s in plan.skipped] == [NEW]
    assert "as incarnation Uq2s3Kz9Q5W" in plan.skipped[0].describe()


def test_a_partition_goes_on_in_its_incarnation_and_a_retention_skip_stays_in_it():
    positions = [PartitionPosition("events", 0, 5, 0, 9), PartitionPosition("events", 1, 5, 8, 9)]
    plan = planned(positions, {("events", 0): NEW, ("events", 1): NEW}, {"events": TOPIC_ID}, {"events": TOPIC_ID})
    assert [r.incarnation for r in plan.ranges] == [NEW, NEW] and [s.incarnation for s in plan.skipped] == [""]


def test_without_topic_ids_a_restart_below_the_committed_offset_enters_an_incarnation_drawn_at_random():
    plan = planned([PartitionPosition("events", 0, 30, 0, 5)], {("events", 0): ""}, {}, {"events": None})
    tag = plan.ranges[0].incarnation
    assert tag and parse_final_name(plan.ranges[0].name_as(HiveFormat.PARQUET)).incarnation == tag
    assert plan.skipped[0].incarnation == tag


def test_with_the_same_topic_id_a_log_that_ends_below_the_committed_offset_stays_in_its_incarnation():
    """An unclean leader election truncated the log: the same topic, so `verify` names what is
    loaded twice rather than taking it for another topic."""
    plan = planned([PartitionPosition("events", 0, 30, 0, 25)], {("events", 0): ""}, {"events": TOPIC_ID},
                   {"events": TOPIC_ID})
    assert plan.ranges[0].incarnation == "" and plan.skipped[0].incarnation == ""


def test_the_commit_that_enters_an_incarnation_records_the_one_left_and_moves_the_origin():
    state = CommittedState({("events", 0): CommittedOffset(30, 1, 0)}, {"events": "old-id"}, 1)
    skip = SkippedRange("events", 0, 30, 0, 0, 5, "recreated", NEW)
    batch = Batch(7, BatchState.REGISTERED, "", {}, (OffsetRange("events", 0, 0, 5, 30, NEW),), skipped=(skip,),
                  topic_ids={"events": TOPIC_ID})
    offsets, ids = offsets_after(batch, state)
    after = offsets[("events", 0)]
    assert (after.value, after.origin, after.incarnation, after.past) == (5, 0, NEW, (Incarnation("", 0, 30),))
    assert ids == {"events": TOPIC_ID}
    nxt = Batch(8, BatchState.REGISTERED, "", {}, (OffsetRange("events", 0, 5, 9, 5, NEW),))
    again = offsets_after(nxt, CommittedState(offsets, ids, 2))[0][("events", 0)]
    assert (again.value, again.origin, again.incarnation, again.past) == (9, 0, NEW, (Incarnation("", 0, 30),))


def test_a_snapshot_keeps_the_incarnations_and_reads_entries_written_before_them():
    offsets = {("events", 0): recreated(), ("events", 1): CommittedOffset(4, 1, 0)}
    entries = [_encode(key, found) for key, found in sorted(offsets.items())]
    assert len(entries[1]) == 7  # a partition never recreated is stored as before incarnations
    assert _decode(entries, 1) == offsets
    assert _decode([["events", 0, 30, 0, None, None, None]], 1) == {("events", 0): CommittedOffset(30, 1, 0)}


def test_a_skip_event_names_the_incarnation_it_entered_and_older_events_still_read():
    event = Skipped(7, "2026-11-27T10:00:00+00:00", "events", 0, 30, 0, 0, 5, "recreated", NEW)
    assert from_json(to_json(event)) == event and "new incarnation Uq2s3Kz9Q5W" in event.describe()
    old = {k: v for k, v in to_json(event).items() if k != "incarnation"}
    assert from_json(old).incarnation == ""


# -- verify --------------------------------------------------------------------------------------

def test_a_recreated_topics_incarnations_are_walked_apart_and_are_no_overlap():
    inventory = Inventory([wfile(0, 20), wfile(20, 30), wfile(0, 5, NEW)])
    assert check_ranges(inventory, {("events", 0): recreated()}, None, []) == []
    spans = walk_partitions(inventory, {("events", 0): recreated()}, None, [])[0].spans
    assert [(s.incarnation, s.lo, s.hi) for s in spans] == [("", 0, 20), ("", 20, 30), (NEW, 0, 5)]


def test_a_gap_in_the_old_incarnation_is_still_a_gap_named_with_its_offsets():
    problems = check_ranges(Inventory([wfile(20, 30), wfile(0, 5, NEW)]), {("events", 0): recreated()}, None, [])
    assert [(p.kind, p.where) for p in problems] == [("gap", "events[0]")]
    assert "[0, 20)" in problems[0].detail


def test_an_overlap_or_a_gap_inside_the_new_incarnation_is_still_not_ok():
    committed = {("events", 0): recreated(value=9)}
    overlap = check_ranges(Inventory([wfile(0, 20), wfile(20, 30), wfile(0, 5, NEW), wfile(3, 9, NEW)]), committed,
                           None, [])
    assert [(p.kind, p.where) for p in overlap] == [("overlap", f"events[0] (incarnation {NEW})")]
    gap = check_ranges(Inventory([wfile(0, 20), wfile(20, 30), wfile(0, 5, NEW)]), committed, None, [])
    assert [(p.kind, p.where) for p in gap] == [("gap", f"events[0] (incarnation {NEW})")]


def test_a_file_of_an_incarnation_zookeeper_records_nothing_of_is_named():
    other = wfile(0, 5, "AAAAAAAAAAA")
    problems = check_ranges(Inventory([wfile(0, 20), wfile(20, 30), wfile(0, 5, NEW), other]),
                            {("events", 0): recreated()}, None, [])
    assert [(p.kind, p.detail.split(" ")[0]) for p in problems] == [("uncovered_file", other.path)]


def test_an_old_incarnations_file_past_its_end_is_beyond_what_it_committed():
    problems = check_ranges(Inventory([wfile(0, 20), wfile(20, 35), wfile(0, 5, NEW)]), {("events", 0): recreated()},
                            None, [])
    assert sorted(p.kind for p in problems) == ["gap", "uncovered_file"]


# -- recover -------------------------------------------------------------------------------------

class _Kafka:
    """What recovery asks Kafka: the new topic holds [0, 5) of partition 0, under TOPIC_ID."""

    def topics_on_broker(self):
        return {"events"}

    def watermarks(self, partitions):
        return {tp: (0, 5) for tp in partitions}

    def topic_ids(self, topics):
        return {t: TOPIC_ID for t in topics}

    def records_at(self, wanted):
        return {}


class _Store:
    def topic_ids(self):
        return {"events": TOPIC_ID}


def test_recover_rewrites_only_the_current_incarnations_gaps_and_reports_the_old_ones_lost():
    committed = {("events", 0): recreated()}
    walk = walk_partitions(Inventory([wfile(20, 30)]), committed, None, [])[0]
    rewrite, lost = _split_by_kafka(walk.gaps, _Kafka(), _Store(), committed)
    assert [(s.incarnation, s.lo, s.hi) for s in rewrite] == [(NEW, 0, 5)]
    assert [(s.incarnation, s.lo, s.hi) for s in lost] == [("", 0, 20)]


# -- compaction and reset ------------------------------------------------------------------------

def test_compaction_merges_each_incarnation_apart_under_its_tag():
    inputs = [InputFile(final_name("events", 0, 0, 20), 10, 20, ((0, 20),)),
              InputFile(final_name("events", 0, 20, 30), 10, 10, ((20, 30),)),
              InputFile(final_name("events", 0, 0, 5, NEW), 10, 5, ((0, 5),)),
              InputFile(final_name("events", 0, 5, 9, NEW), 10, 4, ((5, 9),))]
    outputs = plan_outputs(inputs, 1 << 30)
    assert sorted(o.name for o in outputs) == sorted([final_name("events", 0, 0, 30),
                                                      final_name("events", 0, 0, 9, NEW)])


def test_a_backwards_reset_moves_out_only_the_current_incarnations_files():
    inventory = Inventory([wfile(0, 20), wfile(20, 30), wfile(0, 5, NEW), wfile(5, 9, NEW)])
    refusals, moving = _backwards([OffsetChange("events", 0, 9, 5)], inventory, True, {("events", 0): NEW})
    assert refusals == [] and moving == [wfile(5, 9, NEW).path]


def test_by_event_time_each_incarnations_range_is_checked_against_its_own_manifest():
    from etl.ops.parts import check_parts
    from etl.sink.manifest import Part

    other = "dt=2026-11-27/hour=11"
    old = [wfile(0, 20), WarehouseFile(f"/wh/{other}/{final_name('events', 0, 0, 20)}", other,
                                       FileRange("events", 0, 0, 20))]
    new = [wfile(0, 20, NEW)]
    manifests = [RangeManifest("events", 0, 0, 20, (Part(FOLDER, 10), Part(other, 10))),
                 RangeManifest("events", 0, 0, 20, (Part(FOLDER, 20),), incarnation=NEW)]
    assert check_parts(Inventory(old + new), manifests, None) == []
    problems = check_parts(Inventory(old), manifests, None)  # the new incarnation's part is gone
    assert [(p.kind, p.where) for p in problems] == [("missing_part",
                                                      f"events[0] {range_stem('events', 0, 0, 20, NEW)}")]


def test_tagging_a_plan_keeps_the_partitions_that_wait_for_an_open_transaction():
    """The run logs a waiting partition's WARNING from the tagged plan: tagging must not drop it."""
    waiting = PartitionPosition("t", 0, committed=27, low=0, high=11, log_end=27, same_topic=True)
    moving = PartitionPosition("t", 1, committed=0, low=0, high=5)
    plan = plan_ranges([waiting, moving], JobConfig(name="j"))
    assert plan.waiting == (waiting,)
    tagged = with_incarnations(plan, {}, {}, {"t": None})
    assert tagged.waiting == (waiting,) and [n for _, n in tagged.notes()] == [n for _, n in plan.notes()]
