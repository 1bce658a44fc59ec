"""`etl reset-offsets --move-aside` over a compacted partition: a merged file holds several
ranges, and is moved, and said, once."""
from __future__ import annotations

import json
import re

from tests.harness.etl_process import etl_command, run_etl
from tests.harness.oracle import check_exactly_once, expected_offsets, hive_reader
from tests.harness.warehouse_files import DATA_SUFFIX

DB = "etl_test"


def test_a_merged_file_moved_aside_is_reported_once(spark, new_topic, produce, write_config, hive_table_name,
                                                   warehouse_dir):
    topic = new_topic(partitions=1)
    produce(topic, {0: [json.dumps({"event_id": i, "ts": "2026-11-20 10:15:00"}).encode() for i in range(36)]})
    config = write_config(kafka={"topics": topic}, job={"max_records_per_partition": "6"},
                          compaction={"min_files": "2", "keep_superseded_minutes": "0"})
    assert run_etl(config).returncode == 0
    table = warehouse_dir / f"{DB}.db" / hive_table_name
    [partition] = [str(p.relative_to(table)) for p in table.glob("dt=*/hour=*")]  # by planning time
    assert len(list((table / partition).glob(f"*{DATA_SUFFIX}"))) == 6
    compacted = etl_command(config, "compact", "--execute", "--partition", partition)
    assert compacted.returncode == 0, compacted.describe()
    assert len(list(table.rglob(f"*{DATA_SUFFIX}"))) == 1, list(table.rglob(f"*{DATA_SUFFIX}"))  # one file, 6 ranges

    reset = etl_command(config, "reset-offsets", "--to", f"{topic}:0=0", "--move-aside", "--execute")
    assert reset.returncode == 0, reset.describe()
    moves = re.findall(r"move out of the table: (\S+) ->", reset.stdout)
    assert len(moves) == 1, reset.stdout  # 6 ranges in one merged file: it was said 6 times
    assert "moved 1 files out of the table" in reset.stdout, reset.stdout
    moved = list((warehouse_dir / "_etl_moved_aside").rglob(f"*{DATA_SUFFIX}"))
    assert len(moved) == 1, moved

    assert run_etl(config).returncode == 0  # the 36 records loaded again, once
    check_exactly_once(hive_reader(spark), config, expected_offsets(topic, {0: 36}), warehouse_dir)
