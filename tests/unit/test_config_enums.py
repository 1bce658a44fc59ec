"""Settings that name one of a list are parsed into the config's enums, which still equal and
print as the strings written in the INI."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from etl.config import (
    Compression, DecoderKind, DimensionChangePolicy, OutOfRangePolicy, StartingOffsets, ZooKeeperAuth, load_config,
)
from etl.errors import ConfigError
from tests.harness.config_file import minimal_ini

SCHEMA = Path(__file__).resolve().parents[2] / "warehouse_schema" / "events.sql"


def load(tmp_path: Path, job: str = "", hive: str = ""):
    path = tmp_path / "job.ini"
    path.write_text(minimal_ini(SCHEMA, job=job, kafka="topics = t", hive=hive))
    return load_config(path)


def test_the_defaults_are_members(tmp_path):
    job = load(tmp_path).job
    assert job.starting_offsets is StartingOffsets.EARLIEST and job.on_offset_out_of_range is OutOfRangePolicy.FAIL
    assert job.decoder is DecoderKind.JSON and job.compression is Compression.SNAPPY
    assert job.on_dimension_change is DimensionChangePolicy.FAIL


def test_choices_become_members_equal_to_their_strings(tmp_path):
    config = load(tmp_path, "starting_offsets = latest\non_offset_out_of_range = earliest\ndecoder = access_log\n"
                            "compression = zstd\non_dimension_change = use_current", hive="parquet_readers = current")
    job = config.job
    chosen = (job.starting_offsets, job.on_offset_out_of_range, job.decoder, job.compression, job.on_dimension_change)
    assert chosen == (
        StartingOffsets.LATEST, OutOfRangePolicy.EARLIEST, DecoderKind.ACCESS_LOG, Compression.ZSTD,
        DimensionChangePolicy.USE_CURRENT)
    assert type(job.compression) is Compression and config.zookeeper.auth is ZooKeeperAuth.NONE
    assert job.compression == "zstd" and f"{job.compression}" == "zstd" and json.dumps(job.decoder) == '"access_log"'


@pytest.mark.parametrize("key, enum", [("starting_offsets", StartingOffsets), ("compression", Compression),
                                       ("decoder", DecoderKind)])
def test_the_message_lists_the_members(tmp_path, key, enum):
    with pytest.raises(ConfigError, match=rf"\[job\] {key}: 'bogus' is not one of {', '.join(enum)}$"):
        load(tmp_path, f"{key} = bogus")
