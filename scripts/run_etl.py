"""Entry point for spark-submit: `spark-submit scripts/run_etl.py --config FILE [run options]`."""
import sys

from etl.submitted import main

if __name__ == "__main__":
    sys.exit(main(["run", *sys.argv[1:]]))
