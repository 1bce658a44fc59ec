"""The load totals kept with the committed offsets (etl.state.totals) and the counters the
metrics make of them (etl.ops.metrics): what a batch adds, what it does not, and that they are
exported as Prometheus counters named `..._total`."""
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from etl.model.batch import Batch, BatchKind, BatchState, EventTimeRecord, OffsetRange, TouchedPartition
from etl.ops.metrics import totals_metrics
from etl.state.totals import LoadTotals


def batch(kind=BatchKind.LOAD, rows=90, rejected=10, partitions=None) -> Batch:
    return Batch(batch_id=7, state=BatchState.REGISTERED, planned_at="2026-11-25T10:00:00+00:00",
                 partition_values={"dt": "2026-11-25"}, rows=rows, rejected=rejected, kind=kind,
                 ranges=(OffsetRange("t", 0, 0, 60, 0), OffsetRange("t", 1, 10, 50, 10)),
                 event_time=EventTimeRecord(partitions=partitions))


def test_a_load_batch_adds_its_offsets_rows_rejected_late_rows_and_bytes():
    first = LoadTotals().after(batch(partitions=(TouchedPartition("dt=2026-11-25", 50, 3),
                                                 TouchedPartition("dt=2026-11-26", 40, 2))), 4096)
    assert (first.batches, first.offsets, first.rows, first.rejected, first.late, first.bytes) == \
        (1, 100, 90, 10, 5, 4096)
    assert first.since and first.bytes_since == first.since
    second = first.after(batch(rows=1, rejected=0), None)  # bytes not measured (no [metrics])
    assert (second.batches, second.offsets, second.rows, second.rejected, second.bytes) == (2, 200, 91, 10, 4096)
    assert (second.since, second.bytes_since) == (first.since, first.bytes_since)


def test_bytes_never_measured_leave_bytes_since_empty():
    totals = LoadTotals().after(batch(), None)
    assert totals.bytes == 0 and totals.bytes_since == "" and totals.since


def test_a_repair_batch_rewrites_offsets_already_counted_and_adds_nothing():
    assert LoadTotals().after(batch(kind=BatchKind.REPAIR), 100) == LoadTotals()


def test_the_node_round_trips_and_an_empty_node_is_no_load():
    totals = LoadTotals().after(batch(), 12)
    assert LoadTotals.from_bytes(totals.to_bytes()) == totals
    assert LoadTotals.from_bytes(b"") == LoadTotals()
    assert LoadTotals.from_bytes(b'{"rows": 5, "from_a_newer_version": 1}') == LoadTotals(rows=5)
    with pytest.raises(ValueError):
        LoadTotals.from_bytes(b"\x00garbage")


def test_the_totals_are_exported_as_counters_named_total_without_created_series():
    registry = CollectorRegistry(auto_describe=True)
    totals_metrics(registry, LoadTotals(batches=3, offsets=130, rows=120, rejected=10, late=4, bytes=9000,
                                        since="2026-11-25T10:00:00+00:00", bytes_since="x"), "j1")
    text = generate_latest(registry).decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert {name: f.type for name, f in families.items()} == {
        name: "counter" for name in ("etl_batches", "etl_offsets", "etl_rows", "etl_rejected_rows",
                                     "etl_late_rows", "etl_written_bytes")}
    samples = {s.name: (s.labels, s.value) for f in families.values() for s in f.samples}
    assert samples["etl_rows_total"] == ({"etl_job": "j1"}, 120.0)
    assert samples["etl_written_bytes_total"] == ({"etl_job": "j1"}, 9000.0)
    assert "_created" not in text


def test_bytes_never_measured_are_left_out_rather_than_reported_as_zero():
    registry = CollectorRegistry(auto_describe=True)
    totals_metrics(registry, LoadTotals(batches=1, rows=5), "j1")
    assert "etl_written_bytes_total" not in generate_latest(registry).decode()
