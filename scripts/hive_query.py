"""Run one SQL query against the job's Hive metastore and print the result as a table.

    hive_query.py --config conf/local.ini "SELECT count(*) FROM logs.access_log"
"""
import argparse
import sys

from etl.config import load_config
from etl.hive.spark import build_spark


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True)
    parser.add_argument("--rows", type=int, default=100)
    parser.add_argument("sql")
    args = parser.parse_args()
    spark = build_spark(load_config(args.config))
    spark.sql(args.sql).show(args.rows, truncate=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
