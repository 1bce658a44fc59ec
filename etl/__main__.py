"""`python -m etl ...`: the same commands as the `etl` console script; also the application that
spark-submit runs (etl.submitted)."""
import sys

from etl.submitted import main

if __name__ == "__main__":
    sys.exit(main())
