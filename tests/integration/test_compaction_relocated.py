"""Compaction never deletes the files Hive reads (issue 26, defect 4).

A partition is compacted, then an operator points it back at its old folder by hand (`ALTER
TABLE ... PARTITION ... SET LOCATION`, as when restoring a backup). Past the grace period of the
replaced files, `etl compact` and `etl run` used to delete them: the files Hive now read, so the
partition showed no rows. They must refuse, naming both folders, and leave every file.
"""
from __future__ import annotations

from pathlib import Path

from etl.config import load_config
from etl.hive.sql import quote_identifier, quote_literal
from etl.model.compaction import COMPACTED_FOLDER
from etl.model.naming import partition_values
from tests.harness.etl_process import etl_command, run_etl
from tests.harness.oracle import check_exactly_once, expected_offsets, hive_reader, table_offsets
from tests.integration.test_compaction import (DB, RECORDS, compaction_config, parquet_files, partitions_of,
                                               records)


def point_partition_at(spark, table: str, partition: str, folder: Path) -> None:
    spec = ", ".join(f"{quote_identifier(k)}={quote_literal(v)}" for k, v in partition_values(partition).items())
    spark.sql(f"ALTER TABLE {quote_identifier(DB)}.{quote_identifier(table)} PARTITION ({spec}) "
              f"SET LOCATION {quote_literal(f'file://{folder}')}")
    spark.catalog.refreshTable(f"{DB}.{table}")


def test_a_partition_pointed_back_at_its_old_folder_keeps_its_files_and_rows(
        spark, new_topic, produce, write_config, hive_table_name, warehouse_dir):
    topic = new_topic(partitions=2)
    produce(topic, {p: records(n) for p, n in RECORDS.items()})
    kept = compaction_config(write_config, topic, keep_superseded_minutes="60")  # replaced files kept an hour
    assert run_etl(kept).returncode == 0
    [partition] = partitions_of(warehouse_dir, hive_table_name)
    root = warehouse_dir / f"{DB}.db" / hive_table_name
    old_folder = root / partition
    originals = parquet_files(old_folder)
    assert len(originals) == 9

    done = etl_command(kept, "compact", "--execute", "--partition", partition)
    assert done.returncode == 0, done.describe()
    [new_folder] = {p.parent for p in parquet_files(root / COMPACTED_FOLDER)}
    assert parquet_files(old_folder) == originals  # in their grace period

    point_partition_at(spark, hive_table_name, partition, old_folder)  # the operator restores the old folder
    expected = expected_offsets(topic, RECORDS)
    assert table_offsets(spark, DB, hive_table_name) == expected

    past_grace = compaction_config(write_config, topic)  # keep_superseded_minutes = 0: the grace period is over
    for command in (lambda: etl_command(past_grace, "compact", "--execute"), lambda: run_etl(past_grace)):
        refused = command()
        assert refused.returncode == 1, refused.describe()
        assert f"Hive reads partition {partition}" in refused.stderr, refused.describe()
        assert str(old_folder) in refused.stderr and str(new_folder) in refused.stderr, refused.describe()
        assert "SET LOCATION" in refused.stderr, refused.describe()
        assert parquet_files(old_folder) == originals, "a file Hive reads was deleted"
        assert all(p.exists() for p in originals)
        spark.catalog.refreshTable(f"{DB}.{hive_table_name}")
        assert table_offsets(spark, DB, hive_table_name) == expected  # every row, exactly once

    # The remedy the message gives: point the partition at the merged folder and run again.
    point_partition_at(spark, hive_table_name, partition, new_folder)
    finished = etl_command(past_grace, "compact", "--execute")
    assert finished.returncode == 0, finished.describe()
    assert parquet_files(old_folder) == []
    assert load_config(past_grace).hive.table == hive_table_name
    check_exactly_once(hive_reader(spark), past_grace, expected, warehouse_dir)
