"""Produce sample application log lines (the access-log example of conf/local.ini) into a Kafka topic.

    produce_sample_logs.py --bootstrap 127.0.0.1:9092 --topic access_logs --count 20000

One line in 500 is malformed on purpose, to show the <table>_rejected companion table.
The topic is created with --partitions if it does not exist.
"""
import argparse
import datetime as dt
import random

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

LEVELS = ["INFO"] * 6 + ["WARN"] * 2 + ["ERROR"] * 2
MESSAGES = ["user login", "cache miss", "payment declined", "timeout calling inventory", "request served"]


def line(number: int, at: dt.datetime, rng: random.Random) -> bytes:
    if number % 500 == 499:
        return b"\xff garbled line without a timestamp"
    return f"{at:%Y-%m-%d %H:%M:%S} {rng.choice(LEVELS)} {rng.choice(MESSAGES)} #{number}".encode()


def ensure_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    if topic not in admin.list_topics(timeout=10).topics:
        admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="access_logs")
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--partitions", type=int, default=4)
    args = parser.parse_args()
    ensure_topic(args.bootstrap, args.topic, args.partitions)
    rng, start = random.Random(2017), dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=30)
    producer = Producer({"bootstrap.servers": args.bootstrap, "linger.ms": 20})
    for number in range(args.count):
        at = start + dt.timedelta(seconds=number * 1800 / args.count)
        producer.produce(args.topic, line(number, at, rng), partition=number % args.partitions)
        producer.poll(0)
    producer.flush(30)
    print(f"produced {args.count} log lines to {args.topic} ({args.partitions} partitions)")


if __name__ == "__main__":
    main()
