"""etl.job.packing: which ranges share a Spark task. Every range is in exactly one task; a large
range keeps a task of its own; small ones fill at least every slot, evenly."""
from __future__ import annotations

import itertools

import pytest

from etl.config.model import JobConfig
from etl.job.packing import pack_ranges, run_each


def _covered_once(packs: list[list[int]], count: int) -> None:
    flat = list(itertools.chain.from_iterable(packs))
    assert sorted(flat) == list(range(count)), packs
    assert all(packs), "an empty task"


def test_a_thousand_quiet_partitions_fill_the_two_slots_evenly():
    packs = pack_ranges([3] * 1000, 10_000, slots=2)
    _covered_once(packs, 1000)
    assert sorted(len(p) for p in packs) == [500, 500]


def test_a_range_at_or_over_the_limit_keeps_a_task_of_its_own():
    sizes = [200, 30_000, 200, 10_000, 200]
    packs = pack_ranges(sizes, 10_000, slots=2)
    _covered_once(packs, len(sizes))
    assert [1] in packs and [3] in packs
    assert sorted(sum(sizes[i] for i in p) for p in packs if p not in ([1], [3])) == [200, 400]


def test_small_ranges_take_as_many_tasks_as_their_records_need():
    sizes = [4_000] * 10  # 40,000 records: 4 tasks of at most about 10,000
    packs = pack_ranges(sizes, 10_000, slots=2)
    _covered_once(packs, 10)
    assert len(packs) == 4
    assert max(sum(sizes[i] for i in p) for p in packs) <= 12_000


def test_never_more_tasks_than_ranges():
    assert pack_ranges([5], 10_000, slots=8) == [[0]]
    assert pack_ranges([], 10_000, slots=2) == []


def test_one_record_per_task_is_a_task_per_range_as_the_direct_stream_does():
    sizes = [1, 3, 2]
    assert sorted(pack_ranges(sizes, 1, slots=2)) == [[0], [1], [2]]


@pytest.mark.parametrize("slots", [1, 2, 3])
def test_the_same_plan_packs_the_same_way_in_range_order(slots):
    sizes = [7, 3, 3, 9, 1, 3, 2]
    first = pack_ranges(sizes, 10, slots)
    assert first == pack_ranges(sizes, 10, slots)
    assert all(p == sorted(p) for p in first)
    _covered_once(first, len(sizes))


def test_the_default_packs_only_ranges_smaller_than_the_seeds_partitions():
    """The seeds' shape (about 30,000 records a partition) keeps a task per partition."""
    assert JobConfig(name="j").records_per_task == 10_000
    assert len(pack_ranges([30_327] * 18, JobConfig(name="j").records_per_task, slots=2)) == 18


def test_a_pack_of_several_ranges_shares_one_consumer_per_settings_and_closes_it_at_its_end():
    from etl.source import reused
    settings = {"bootstrap.servers": "127.0.0.1:1", "group.id": "g"}  # nothing listens: no fetch is made
    seen = []

    def call(item):
        seen.append((item, reused.reused_consumer(settings), reused.reused_consumer({**settings, "group.id": "h"})))
        return item

    assert run_each(call, ["a", "b", "c"]) == ["a", "b", "c"]
    consumers = {id(first) for _, first, _ in seen}
    assert len(consumers) == 1 and seen[0][1] is not seen[0][2]  # one per settings, the same for every range
    with pytest.raises(RuntimeError):  # closed with the pack
        seen[0][1].open("t", 0, 0, 1)
    assert reused.reused_consumer(settings) is None  # outside a pack: each range makes its own
    run_each(call, ["alone"])
    assert seen[-1][1] is None  # a range with a task of its own reads with its own consumer, as before


def test_a_shared_consumers_record_of_an_earlier_assignment_is_never_the_ranges():
    from confluent_kafka import Message
    from etl.source.ranges import _records_of
    messages = [Message(topic=t, partition=p, offset=o, value=b"{}")
                for t, p, o in (("t", 0, 7), ("t", 1, 3), ("u", 0, 8))]
    records, _ = _records_of(messages, "t", 0, 7, 10, only_this_partition=True)
    assert [(m.topic(), m.partition(), m.offset()) for m in records] == [("t", 0, 7)]
    assert _records_of(messages, "t", 0, 7, 10)[0] == messages  # a consumer of its own: no check, no cost


def test_a_pack_assigns_every_announced_partition_at_once_before_its_first_range_is_read():
    """librdkafka then fetches the pack's partitions together, not one round trip a range."""
    from etl.source import reused
    settings = {"bootstrap.servers": "127.0.0.1:1", "group.id": "g"}
    assigned = []

    def call(item):
        consumer = reused.reused_consumer(settings)
        assigned.append(sorted((tp.topic, tp.partition, tp.offset) for tp in consumer._consumer.assignment()))
        consumer.open("t", item, 10 * item, 10 * item + 3)
        consumer.release("t", item)
        return item

    assert run_each(call, [0, 1, 2],
                    reads=lambda p: reused.PackedRead(settings, "t", p, 10 * p, 10 * p + 3)) == [0, 1, 2]
    assert assigned == [[("t", 0, 0), ("t", 1, 10), ("t", 2, 20)], [("t", 1, 10), ("t", 2, 20)], [("t", 2, 20)]]


def test_a_packs_consumer_holds_a_ranges_records_and_one_past_its_end_for_its_turn():
    """What arrives for a range not yet read is held (its records, and one record past its end,
    which shows a read where the log goes on); more past the end is dropped, and a released
    partition's late records are held for nobody."""
    from confluent_kafka import Message
    from etl.source.reused import PackConsumer, PackedRead
    from tests.harness.handed_out import HandedOut

    settings = {"bootstrap.servers": "127.0.0.1:1", "group.id": "g"}
    pack = PackConsumer(settings)
    pack._consumer = HandedOut([Message(topic="t", partition=p, offset=o, value=b"v") for p, o in
                              [(1, 0), (2, 0), (1, 1), (1, 2), (2, 1), (1, 3), (1, 4), (1, 5), (9, 0)]])
    pack._assign([PackedRead(settings, "t", 1, 0, 3), PackedRead(settings, "t", 2, 0, 2)])
    assert [m.offset() for m in pack.take("t", 2, 10, 0.0)] == [0, 1]  # partition 1's are held meanwhile
    pack.release("t", 2)
    assert [m.offset() for m in pack.take("t", 1, 10, 0.0)] == [0, 1, 2, 3]


def test_a_pack_with_two_ranges_of_one_partition_assigns_the_second_at_its_turn():
    """A repair batch rewrites each range of a merged file: one partition's ranges, one after the
    other, may share a pack. librdkafka refuses a partition twice in one assignment, so the
    first is assigned ahead and the next when its turn comes."""
    from etl.source import reused
    settings = {"bootstrap.servers": "127.0.0.1:1", "group.id": "g"}
    assigned = []

    def call(item):
        partition, start, end = item
        consumer = reused.reused_consumer(settings)
        consumer.open("t", partition, start, end)
        assigned.append(sorted((tp.partition, tp.offset) for tp in consumer._consumer.assignment()))
        consumer.release("t", partition)
        return item

    items = [(0, 0, 10), (1, 0, 5), (0, 10, 20)]
    assert run_each(call, items, reads=lambda item: reused.PackedRead(settings, "t", *item)) == items
    assert assigned == [[(0, 0), (1, 0)], [(1, 0)], [(0, 10)]]
