"""[hive] max_partitions_per_batch: a whole number of partitions, 1 or more, or left out (no cap)."""
import pytest

from etl.config import load_config
from etl.errors import EXIT_USAGE, ConfigError
from tests.harness.config_file import minimal_ini


def hive(tmp_path, request, lines: str):
    schema = request.config.rootpath / "warehouse_schema" / "events.sql"
    path = tmp_path / "job.ini"
    path.write_text(minimal_ini(schema) + "partition_by = column:ts\n" + lines)
    return load_config(path).hive


def test_left_out_is_no_cap(tmp_path, request):
    assert hive(tmp_path, request, "").max_partitions_per_batch is None


def test_a_cap(tmp_path, request):
    assert hive(tmp_path, request, "max_partitions_per_batch = 720\n").max_partitions_per_batch == 720


@pytest.mark.parametrize("value", ["0", "-3", "1.5", "many", "1e3"])
def test_a_bad_cap_names_the_key(tmp_path, request, value):
    with pytest.raises(ConfigError, match=r"\[hive\] max_partitions_per_batch: .* whole number") as raised:
        hive(tmp_path, request, f"max_partitions_per_batch = {value}\n")
    assert raised.value.exit_code == EXIT_USAGE


def test_what_happens_past_the_cap(tmp_path, request):
    assert hive(tmp_path, request, "").on_too_many_partitions == "fail"
    assert hive(tmp_path, request, "on_too_many_partitions = reject\n").on_too_many_partitions == "reject"
    with pytest.raises(ConfigError, match=r"\[hive\] on_too_many_partitions") as raised:
        hive(tmp_path, request, "on_too_many_partitions = drop\n")
    assert raised.value.exit_code == EXIT_USAGE
