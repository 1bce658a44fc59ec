"""The benchmark's records, produced through the harness's one producer."""
from __future__ import annotations

from tests.harness.kafka import send, watermarks


def value_maker(decoder: str, record_bytes: int):
    """make(i) -> bytes: record i, padded to record_bytes when shorter.

    json: tests.harness.data.event(i) (same fields and formatting, built without json.dumps
    so that 10M records are quick), plus a "pad" field the decoder ignores.
    access_log: '<date> <time> <LEVEL> <message>' lines, padded with text in the message.
    """
    if decoder == "json":
        def make(i: int) -> bytes:
            head = (f'{{"event_id": {i}, "user_id": "u{i % 7}", "action": "click", "amount": {i / 10!r}, '
                    f'"ts": "2026-11-21 10:00:00", "ok": {"true" if i % 2 == 0 else "false"}')
            room = record_bytes - len(head) - len(', "pad": ""}')
            return (head + (f', "pad": "{"x" * room}"}}' if room > 0 else "}")).encode()
    else:
        levels = ("INFO", "INFO", "INFO", "WARN", "ERROR")

        def make(i: int) -> bytes:
            text = f"2026-11-21 10:{i // 60 % 60:02d}:{i % 60:02d} {levels[i % 5]} request served #{i}"
            room = record_bytes - len(text) - 1
            return (text + (" " + "x" * room if room > 0 else "")).encode()
    return make


def produce_checked(bootstrap: str, topic: str, counts: dict[int, int], make, start: dict[int, int] | None = None,
                    first_ids: dict[int, int] | None = None) -> dict:
    """Produce counts[p] records make(i) to each partition p, streaming (nothing held in
    memory), then check that the broker's end offsets are exactly start + count.

    Record ids run on from partition to partition, unless first_ids says where each starts."""
    first_ids = first_ids or {}
    base = {p: first_ids.get(p, sum(counts[q] for q in counts if q < p)) for p in counts}
    values = {p: (make(i) for i in range(base[p], base[p] + n)) for p, n in counts.items()}
    produced = send(topic, values, bootstrap=bootstrap, timeout=300, keep_offsets=False)
    marks = watermarks(topic, bootstrap=bootstrap)
    start = start or {}
    wrong = {p: marks[p] for p, n in counts.items() if marks[p][1] != start.get(p, 0) + n}
    if wrong:
        raise RuntimeError(f"{topic}: end offsets after producing are not exact: {dict(list(wrong.items())[:5])}")
    return {"records": produced.records, "bytes": produced.bytes, "seconds": produced.seconds, "watermarks": marks}
