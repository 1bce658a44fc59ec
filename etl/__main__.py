"""`python -m etl ...`: the same commands as the `etl` console script."""
import sys

from etl.cli import main

if __name__ == "__main__":
    sys.exit(main())
