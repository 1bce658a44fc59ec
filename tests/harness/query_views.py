"""The oracle of what an analyst's query may see while the ETL commits (used by
tests/integration/test_analysts_endpoint.py, and checked itself by tests/unit/test_analysts_oracle.py):
no row twice, a data file's rows all there or none, no row outside a file."""
from __future__ import annotations

from collections import Counter

from etl.model.naming import FileRange

Key = tuple[str, int, int]  # (kafka_topic, kafka_partition, kafka_offset)


def snapshot_problems(seen: dict[str, Counter], files: dict[str, dict[FileRange, frozenset[int]]]) -> list[str]:
    """What is wrong with one query's view. `seen[table]` counts the rows' (topic, partition,
    offset); `files[table]` maps each final file of the table to the offsets it holds."""
    problems = []
    for table, rows in seen.items():
        problems += [f"{table}: {key} seen {n} times" for key, n in sorted(rows.items()) if n > 1]
        covered: set[Key] = set()
        for f, offsets in sorted(files[table].items()):
            keys = {(f.topic, f.partition, o) for o in offsets}
            covered |= keys
            present = len(keys & rows.keys())
            if 0 < present < len(keys):
                problems.append(f"{table}: partial file {f.topic}+{f.partition}+{f.start}+{f.end}: "
                                f"{present} of its {len(keys)} rows")
        stray = sorted(rows.keys() - covered)
        if stray:
            problems.append(f"{table}: {len(stray)} rows in no data file, e.g. {stray[:3]}")
    return problems
