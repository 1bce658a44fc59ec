"""Avro and Protobuf: the full batch over the same logical records in three
encodings, interleaved, and a row-by-row path over the Avro data.

  json      tests/perf/data.py's events (event_id, user_id, action, amount, ts, ok, pad)
  avro      the same fields, Confluent-framed, the schema registered in a Schema Registry test
            server that this process runs (the executors fetch it over HTTP, as from a real one)
  protobuf  the same, as a Protobuf message
  row-by-row (avro)  fastavro per record into a Python tuple, spark.createDataFrame, the
            DataFrame writer: what a hand-written Spark job does

Payloads are framed by hand after one registration each (the bytes are those confluent-kafka's
serializers write: magic byte, schema id, [message indexes,] payload), so that producing a
million records takes seconds, not minutes.
"""
from __future__ import annotations

import datetime as dt
import io
import shutil
import statistics
import tempfile
from pathlib import Path

from tests.perf.common import rate, say, summarize
from tests.perf.context import BenchRun
from tests.perf.data import produce_checked
from tests.perf.phases import check_loaded, run_job_timed
from tests.perf.spark_tasks import avro_rows_task, row_schema

EVENT_AVRO = {"type": "record", "name": "Event", "namespace": "bench", "fields": [
    {"name": "event_id", "type": "long"}, {"name": "user_id", "type": "string"}, {"name": "action", "type": "string"},
    {"name": "amount", "type": "double"}, {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "ok", "type": "boolean"}, {"name": "pad", "type": "string"}]}
TS = dt.datetime(2026, 11, 21, 10, tzinfo=dt.timezone.utc)
FORMATS = ("json", "avro", "protobuf")
# The head of tests/perf/data.py's JSON record ("ok" at its longer, false): the rest is pad.
_JSON_HEAD = ('{{"event_id": {i}, "user_id": "u0", "action": "click", "amount": {amount!r}, '
              '"ts": "2026-11-21 10:00:00", "ok": false')


def formats_bench(run: BenchRun) -> None:
    from tests.harness.schema_registry_server import SchemaRegistryServer
    with SchemaRegistryServer(Path(tempfile.mkdtemp(prefix="bench-registry-"))) as registry:
        run.start_spark()
        run.report["formats"] = _measure(run, registry.url)


def _measure(run: BenchRun, registry_url: str) -> dict:
    from etl.config import load_config
    args = run.args
    per = {p: args.records // args.partitions for p in range(args.partitions)}
    topics, ranges, records = {}, {}, sum(per.values())
    for name in FORMATS:
        topics[name] = run.new_topic(args.partitions, f"fmt-{name}")
        produced = produce_checked(run.stack.kafka_bootstrap, topics[name], per,
                                   _maker(name, registry_url, topics[name], args.record_bytes))
        ranges[name] = [(topics[name], p, low, high) for p, (low, high) in sorted(produced["watermarks"].items())]
        say(f"produced {produced['records']:,} {name} records ({produced['bytes'] / records:.0f} bytes each)")
    seconds = {name: [] for name in (*FORMATS, "avro_row_by_row")}
    for rep in range(1, args.repeat + 1):
        for name in FORMATS:
            config = load_config(run.ini(f"fmt-{name}-{rep}", [topics[name]], name, max(per.values()) + 1,
                                         registry_url=registry_url if name != "json" else None))
            (phases, _said), _stats = run.measure(f"full batch, {name} #{rep}", lambda: run_job_timed(config),
                                                  workers=True)
            check_loaded(config, ranges[name], records)
            seconds[name].append(phases["batch"])
        _, stats = run.measure(f"row-by-row, avro #{rep}", _row_by_row(run, ranges["avro"], records, rep))
        seconds["avro_row_by_row"].append(stats["seconds"])
    median = {name: statistics.median(values) for name, values in seconds.items()}
    ratios = {"avro_vs_json": median["json"] / median["avro"], "protobuf_vs_json": median["json"] / median["protobuf"],
              "avro_vs_avro_row_by_row": median["avro_row_by_row"] / median["avro"],
              "protobuf_vs_avro_row_by_row": median["avro_row_by_row"] / median["protobuf"]}
    say("formats (median batch): " + ", ".join(f"{k} {v:.2f}s" for k, v in median.items()) + "; " +
        ", ".join(f"{k} {v:.2f}x" for k, v in ratios.items()))
    for topic in topics.values():
        run.delete_topic(topic)
    return {"records": records, "seconds": {k: summarize(v) for k, v in seconds.items()},
            "rates": {k: rate(records, 0, v)["records_per_s"] for k, v in median.items()}, "ratios": ratios}


def _row_by_row(run: BenchRun, ranges: list, records: int, rep: int):
    settings = {"bootstrap.servers": run.stack.kafka_bootstrap}
    specs = [(settings, t, p, s, e, EVENT_AVRO) for t, p, s, e in ranges]
    out = run.work / f"avro-row-by-row-{rep}"

    def go():
        rdd = run.spark.sparkContext.parallelize(specs, len(specs)).flatMap(avro_rows_task)
        run.spark.createDataFrame(rdd, row_schema("json")).write.parquet(f"file://{out}")
        written = run.spark.read.parquet(f"file://{out}").count()
        shutil.rmtree(out, ignore_errors=True)
        if written != records:
            raise RuntimeError(f"row-by-row wrote {written} rows, expected {records}")
    return go


def _fields(i: int, record_bytes: int) -> dict:
    """Record i's fields, the pad as long as in the JSON record (so the content is the same)."""
    pad = max(0, record_bytes - len(_JSON_HEAD.format(i=i, amount=i / 10)) - len(', "pad": ""}'))
    return {"event_id": i, "user_id": f"u{i % 7}", "action": "click", "amount": i / 10, "ts": TS,
            "ok": i % 2 == 0, "pad": "x" * pad}


def _maker(name: str, registry_url: str, topic: str, record_bytes: int):
    if name == "json":
        from tests.perf.data import value_maker
        return value_maker("json", record_bytes)
    if name == "avro":
        return _avro_maker(registry_url, topic, record_bytes)
    return _protobuf_maker(registry_url, topic, record_bytes)


def _avro_maker(registry_url: str, topic: str, record_bytes: int):
    import fastavro
    from tests.harness.registry_payloads import AvroProducerCodec, registry_client
    header = AvroProducerCodec(registry_client(registry_url), EVENT_AVRO, topic)(_fields(0, record_bytes))[:5]
    parsed = fastavro.parse_schema(EVENT_AVRO)

    def make(i: int) -> bytes:
        out = io.BytesIO()
        out.write(header)
        fastavro.schemaless_writer(out, parsed, _fields(i, record_bytes))
        return out.getvalue()
    return make


def _protobuf_maker(registry_url: str, topic: str, record_bytes: int):
    from tests.harness.registry_payloads import ProtobufProducerCodec, bench_message_class, registry_client
    message_class = bench_message_class()
    first = ProtobufProducerCodec(registry_client(registry_url), message_class, topic)
    header = first.serializer(message_class(event_id=0), first.context)[:6]  # magic, id, index [0]

    def make(i: int) -> bytes:
        fields = _fields(i, record_bytes)
        message = message_class(event_id=i, user_id=fields["user_id"], action="click", amount=fields["amount"],
                                ok=fields["ok"], pad=fields["pad"])
        message.ts.FromDatetime(TS)
        return header + message.SerializeToString()
    return make
