"""The Spark line seam (etl/spark_line.py): chosen from the installed pyspark, and what it says
about that pyspark holds. Runs under either line (the suite under 3.5: docs/installing.md)."""
from __future__ import annotations

import inspect
import re
from pathlib import Path

import pyarrow as pa
import pyspark
import pytest
from pyspark.errors import PySparkRuntimeError

from etl import spark_line
from etl.errors import ConfigError, EXIT_USAGE

PACKAGE = Path(spark_line.__file__).resolve().parent
JARS = Path(pyspark.__file__).parent / "jars"


@pytest.mark.parametrize("version, line", [
    ("3.5.0", spark_line.SPARK_35), ("3.5.9", spark_line.SPARK_35),
    ("4.0.0", spark_line.SPARK_4), ("4.2.0", spark_line.SPARK_4), ("4.3.0.dev1", spark_line.SPARK_4),
])
def test_a_version_falls_in_its_line(version, line):
    assert spark_line.line_of(version) is line


@pytest.mark.parametrize("version", ["3.4.4", "3.6.0", "2.4.8", "5.0.0", "35.0"])
def test_a_version_outside_both_lines_is_a_config_error_naming_it(version):
    with pytest.raises(ConfigError,
                       match=rf"pyspark {re.escape(version)} is installed; .* Spark 3\.5\.x or 4\.x") as caught:
        spark_line.line_of(version)
    assert caught.value.exit_code == EXIT_USAGE


def test_the_installed_pyspark_is_read_once():
    assert spark_line.current() is spark_line.line_of(pyspark.__version__)
    assert spark_line.current() is spark_line.current()


def test_the_lines_scala_is_in_the_names_of_the_installed_jars():
    """Spark's own modules (spark-yarn here, spark-sql-kafka-0-10 from Maven) carry the line's Scala."""
    line = spark_line.current()
    assert (JARS / f"spark-yarn_{line.scala}-{pyspark.__version__}.jar").is_file(), sorted(JARS.glob("spark-yarn_*"))


@pytest.mark.parametrize("line", [spark_line.SPARK_35, spark_line.SPARK_4], ids=lambda line: line.name)
def test_each_lines_json_log_overlay_is_package_data(line):
    overlay = PACKAGE / "hive" / line.driver_log4j2_json
    assert overlay.is_file() and "appender.console.name = console" in overlay.read_text()


def _runtime_error(condition: str) -> PySparkRuntimeError:
    """A PySparkRuntimeError as the installed pyspark makes one (3.5: error_class=, 4.x: errorClass=)."""
    if "errorClass" in inspect.signature(PySparkRuntimeError).parameters:
        return PySparkRuntimeError(errorClass=condition, messageParameters={})
    return PySparkRuntimeError(error_class=condition, message_parameters={})


def test_the_condition_of_pysparks_own_error_is_read_and_other_errors_have_none():
    line = spark_line.current()
    assert line.error_condition(_runtime_error("JAVA_GATEWAY_EXITED")) == "JAVA_GATEWAY_EXITED"
    assert line.error_condition(RuntimeError("JAVA_GATEWAY_EXITED")) is None


class _Frame:
    """What to_arrow asks of a DataFrame on each line: 4.x's toArrow, 3.5's batches and schema."""

    def __init__(self, batches: list[pa.RecordBatch]):
        from pyspark.sql.types import LongType, StringType, StructField, StructType
        self.schema = StructType([StructField("k", LongType()), StructField("v", StringType())])
        self._batches = batches

    def _collect_as_arrow(self) -> list[pa.RecordBatch]:
        return self._batches

    def toArrow(self) -> pa.Table:
        return pa.Table.from_batches(self._batches) if self._batches else pa.table({"k": pa.array([], pa.int64()),
                                                                                    "v": pa.array([], pa.string())})


@pytest.mark.parametrize("line", [spark_line.SPARK_35, spark_line.SPARK_4], ids=lambda line: line.name)
def test_a_frame_becomes_one_arrow_table_with_its_columns_even_when_empty(line):
    batches = [pa.record_batch({"k": [1, 2], "v": ["a", None]}), pa.record_batch({"k": [3], "v": ["c"]})]
    table = line.to_arrow(_Frame(batches))
    assert table.to_pydict() == {"k": [1, 2, 3], "v": ["a", None, "c"]}
    empty = line.to_arrow(_Frame([]))
    assert empty.num_rows == 0 and empty.schema.names == ["k", "v"]
    assert empty.schema.field("k").type == pa.int64() and empty.schema.field("v").type == pa.string()
