"""What `etl run` says of a committed batch by event time: a range writes one file into each Hive
partition its rows fall in, and the summary counts those files, not the ranges."""
from __future__ import annotations

import datetime as dt
import json

from tests.harness.etl_process import run_etl

HOURS = 5


def test_the_summary_counts_every_file_an_event_time_batch_wrote(new_topic, produce, write_config, warehouse_dir,
                                                                 hive_table_name):
    topic = new_topic(partitions=1)
    at = dt.datetime(2026, 11, 20, 10, 30)
    produce(topic, {0: [json.dumps({"event_id": i, "ts": (at + dt.timedelta(hours=i)).strftime("%Y-%m-%d %H:%M:%S")})
                        .encode() for i in range(HOURS)]})
    config = write_config(kafka={"topics": topic}, hive={"partition_by": "column:ts"})
    run = run_etl(config)
    assert run.returncode == 0, run.describe()
    written = list((warehouse_dir / "etl_test.db" / hive_table_name).glob("dt=*/hour=*/*.parquet"))
    assert len(written) == HOURS  # one range, one file in each hour
    assert f"etl: batch 1 (new) COMMITTED: {HOURS} files, {HOURS} rows" in run.stdout, run.describe()
