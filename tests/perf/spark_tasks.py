"""What the Spark tasks of the benchmark run.

This module is shipped to the Python workers by value (cloudpickle), as the functions of a
script were: the workers need not find tests/ on their path.
"""
from __future__ import annotations

import os
import sys
import time

from pyspark import cloudpickle

cloudpickle.register_pickle_by_value(sys.modules[__name__])


def consumer_for(settings: dict, topic: str, partition: int, start: int):
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({**settings, "group.id": "etl-bench", "enable.auto.commit": False,
                         "enable.auto.offset.store": False, "auto.offset.reset": "error",
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, partition, start)])
    return consumer


def consume_range(settings: dict, topic: str, partition: int, start: int, end: int, timeout: float = 30.0):
    """Yield lists of the messages at offsets [start, end), as the broker returns them.

    Asks for at most the records left in the range: librdkafka's consume(n, timeout) returns
    only when it has n messages or the timeout passed, so asking for more than are left
    makes the last call of every range wait the whole timeout (1 s) for records that are not
    in the range. etl.source.ranges.read_range asks for 10,000 every time."""
    from confluent_kafka import KafkaError
    consumer = consumer_for(settings, topic, partition, start)
    position, deadline = start, time.monotonic() + timeout
    try:
        while position < end:
            messages = consumer.consume(num_messages=min(10_000, end - position), timeout=1.0)
            records = [m for m in messages if m.error() is None]
            if records and records[-1].offset() >= end:
                records = [m for m in records if m.offset() < end]
                position = end
            if records:
                position = max(position, records[-1].offset() + 1)
                deadline = time.monotonic() + timeout
                yield records
            for m in messages:
                error = m.error()
                if error is not None and error.code() == KafkaError._PARTITION_EOF and m.offset() >= end:
                    position = end
                elif error is not None and error.code() != KafkaError._PARTITION_EOF:
                    raise RuntimeError(f"{topic}[{partition}]: {error}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic}[{partition}]: no progress at {position} of [{start}, {end})")
    finally:
        consumer.close()


def drain_task(spec) -> tuple[int, int]:
    """(records, value bytes) of one range: consume and count, nothing else."""
    settings, topic, partition, start, end = spec
    count = size = 0
    for records in consume_range(settings, topic, partition, start, end):
        count += len(records)
        size += sum(map(len, map(type(records[0]).value, records)))
    return count, size


def drain_read_range_task(spec) -> tuple[int, int]:
    """The same range through etl.source.ranges.read_range: consume + RawChunk lists, no decoding."""
    kafka_config, topic, partition, start, end = spec
    from etl.source.ranges import read_range
    count = size = 0
    for chunk in read_range(kafka_config, "etl-bench", topic, partition, start, end, with_keys=False):
        count += len(chunk)
        size += sum(map(len, chunk.values))
    return count, size


def rows_task(spec):
    """Row by row: one Python tuple per record, json.loads (or a regex) per record."""
    import datetime as dt
    import json as json_module
    import re
    settings, topic, partition, start, end, decoder = spec
    utc = dt.timezone.utc
    line = re.compile(rb"^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}) +([A-Z]+)(?: +(.*))?$", re.S)
    for records in consume_range(settings, topic, partition, start, end):
        for m in records:
            millis = m.timestamp()[1]
            lineage = (topic, partition, m.offset(),
                       dt.datetime.fromtimestamp(millis / 1000, utc) if millis >= 0 else None)
            if decoder == "json":
                try:
                    obj = json_module.loads(m.value())
                    ts = obj.get("ts")
                    yield (obj.get("event_id"), obj.get("user_id"), obj.get("action"), obj.get("amount"),
                           dt.datetime.fromisoformat(ts) if ts else None, obj.get("ok")) + lineage
                except (ValueError, AttributeError):
                    continue  # a real job would route it to _rejected; the benchmark data is clean
            else:
                found = line.match(m.value() or b"")
                if found:
                    yield (dt.datetime.fromisoformat(found[1].decode()), found[2].decode(),
                           (found[3] or b"").decode(errors="replace")) + lineage


def avro_rows_task(spec):
    """Row by row over Confluent-framed Avro: fastavro per record into a dict, a tuple per row."""
    import datetime as dt
    import io
    import fastavro
    settings, topic, partition, start, end, writer_schema = spec
    parsed, utc = fastavro.parse_schema(writer_schema), dt.timezone.utc
    for records in consume_range(settings, topic, partition, start, end):
        for m in records:
            record = fastavro.schemaless_reader(io.BytesIO(m.value()[5:]), parsed, None)
            millis = m.timestamp()[1]
            yield (record["event_id"], record["user_id"], record["action"], record["amount"],
                   record["ts"].replace(tzinfo=None), record["ok"], topic, partition, m.offset(),
                   dt.datetime.fromtimestamp(millis / 1000, utc) if millis >= 0 else None)


def row_schema(decoder: str):
    from pyspark.sql import types as T
    lineage = [T.StructField("kafka_topic", T.StringType()), T.StructField("kafka_partition", T.IntegerType()),
               T.StructField("kafka_offset", T.LongType()), T.StructField("kafka_timestamp", T.TimestampType())]
    if decoder == "json":
        data = [T.StructField("event_id", T.LongType()), T.StructField("user_id", T.StringType()),
                T.StructField("action", T.StringType()), T.StructField("amount", T.DoubleType()),
                T.StructField("ts", T.TimestampType()), T.StructField("ok", T.BooleanType())]
    else:
        data = [T.StructField("log_time", T.TimestampType()), T.StructField("level", T.StringType()),
                T.StructField("message", T.StringType())]
    return T.StructType(data + lineage)


def warm_task(_index):
    """Start the Python workers and import what the ETL's tasks import, outside any timing."""
    import importlib
    for module in ("confluent_kafka", "pyarrow.parquet", "etl.job.tasks"):
        importlib.import_module(module)
    return os.getpid()
