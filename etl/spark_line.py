"""The Spark line the job runs on (3.5 or 4.x): everything that differs between them, in one place.

The line is chosen once, from the installed pyspark's version (on a cluster, the cluster's own
pyspark), the first time it is asked for; nothing else in etl/ compares versions. What differs
(docs/installing.md, "Spark 3.5 and 4.x"):
  * the Scala binary version of Spark's own jars (spark-yarn, spark-sql-kafka-0-10): 2.12 vs 2.13;
  * a PySpark error's condition: getErrorClass() in 3.5, getCondition() in 4.x (where
    getErrorClass is deprecated);
  * a DataFrame as an Arrow table: DataFrame.toArrow() is new in 4.0; 3.5 has its private
    _collect_as_arrow() under toPandas;
  * the driver JVM's JSON log layout: 4.x ships log4j-layout-template-json (JsonTemplateLayout),
    3.5 does not, so its JSON lines are written by a PatternLayout that escapes each field.
Hadoop's client (3.3.4 in pyspark 3.5, 3.5.0 in 4.2) and Hive's metastore client (2.3.9 vs
2.3.10) come with pyspark's jars and need nothing here.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable

from etl.errors import ConfigError

SUPPORTED = "3.5.x or 4.x"


@dataclass(frozen=True)
class SparkLine:
    name: str  # "3.5" or "4": what ETL_SPARK_LINE (scripts/setup, scripts/lock) calls it
    scala: str  # the Scala binary version in the names of Spark's jars
    driver_log4j2_json: str  # the JSON overlay of etl/hive/log4j2-driver.properties (package data)
    _condition: Callable[[Any], str | None]
    _to_arrow: Callable[[Any], Any]

    def error_condition(self, exc: BaseException) -> str | None:
        """The error condition (class) of a PySparkException, None for any other exception."""
        from pyspark.errors import PySparkException
        return self._condition(exc) if isinstance(exc, PySparkException) else None

    def to_arrow(self, frame) -> Any:
        """The rows of a DataFrame as one pyarrow.Table, collected on the driver."""
        return self._to_arrow(frame)


def _to_arrow_35(frame) -> Any:
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema
    batches = frame._collect_as_arrow()
    # the batches carry the schema as the JVM wrote it; an empty result has no batch to carry it
    return pa.Table.from_batches(batches) if batches else to_arrow_schema(frame.schema).empty_table()


SPARK_35 = SparkLine("3.5", "2.12", "log4j2-driver-json-spark35.properties",
                     lambda exc: exc.getErrorClass(), _to_arrow_35)
SPARK_4 = SparkLine("4", "2.13", "log4j2-driver-json.properties",
                    lambda exc: exc.getCondition(), lambda frame: frame.toArrow())


def line_of(version: str) -> SparkLine:
    """The line of a pyspark version string ("3.5.9", "4.2.0", "4.1.0.dev1")."""
    major, _, rest = version.partition(".")
    minor = rest.partition(".")[0]
    if major == "4":
        return SPARK_4
    if (major, minor) == ("3", "5"):
        return SPARK_35
    raise ConfigError(f"pyspark {version} is installed; this job runs on Spark {SUPPORTED}")


@functools.cache
def current() -> SparkLine:
    """The installed pyspark's line, read once per process."""
    from pyspark.version import __version__
    return line_of(__version__)
