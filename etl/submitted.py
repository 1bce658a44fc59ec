"""The driver's entry under spark-submit (etl/__main__.py, scripts/run_etl.py): the `etl` command,
and in YARN cluster mode, after a command that succeeded without Spark (a lock-held skip, nothing
new), the SparkContext that the ApplicationMaster demands, so that the application ends SUCCEEDED
rather than FAILED (etl.hive.spark)."""
from __future__ import annotations

from etl import cli
from etl.errors import EXIT_OK
from etl.hive.spark import satisfy_a_yarn_application_master


def main(argv: list[str] | None = None) -> int:
    code = cli.main(argv)
    if code == EXIT_OK:
        satisfy_a_yarn_application_master()
    return code
