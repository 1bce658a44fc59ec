"""Pack the project and its dependencies into one archive for `spark-submit --archives`.

    scripts/pack-env [--output build/kafka-hive-etl-env.tar.gz] [--python /usr/bin/python3.11]
                     [--extras kerberos] [--with-pyspark] [--spark-line 4|3.5] [--force]

The archive is a virtualenv with a regular (not editable) install of the project, made for
`--archives ENV.tar.gz#environment --conf spark.pyspark.python=./environment/bin/python`
(docs/cluster.md, "Running on a cluster"). Like venv-pack's archives it does not contain Python
itself: environment/bin/python is a symlink to the base interpreter, which must exist at the
same path, in the same version, on every node. Build it on the nodes' OS image.

pyspark and py4j are left out by default: spark-submit puts the cluster's own
$SPARK_HOME/python/lib/pyspark.zip and py4j-*.zip on the Python workers' PYTHONPATH, and
that pyspark must match the cluster's JVM side anyway. Leaving it out saves ~490 MB unpacked.
--spark-line (default: $ETL_SPARK_LINE, else 4) picks the Spark line's runtime lock
(requirements/runtime.txt or runtime-spark35.txt): with --with-pyspark, the pyspark it packs.

Why not venv-pack: it refuses the editable install of .venv, so a fresh venv must be built
either way, and what is left (a tar with the interpreter symlinks kept) is a few lines of
scripts/envpack/, the package that does this script's work. We skip what venv-pack adds on
top (rewriting the shebangs of bin/ scripts and the activate scripts), because only
bin/python is ever run from the archive; bin/ keeps nothing else.

A rebuild is skipped when the archive exists and was built from the same project files,
interpreter and options (the key is stored beside it as ARCHIVE.key).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from envpack.inputs import RUNTIME_LOCKS
from envpack.pack import DEFAULT_OUTPUT, PackRequest, pack


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.spark_line not in RUNTIME_LOCKS:  # $ETL_SPARK_LINE's value: argparse checks only what is given
        parser.error(f"ETL_SPARK_LINE={args.spark_line}: choose one of {', '.join(sorted(RUNTIME_LOCKS))}")
    return pack(PackRequest(
        output=Path(args.output).resolve(),
        python=Path(args.python),
        extras=tuple(sorted(e.strip() for e in args.extras.split(",") if e.strip())),
        with_pyspark=args.with_pyspark,
        force=args.force,
        check=not args.no_check,
        spark_line=args.spark_line,
    ))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="scripts/pack-env", description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", default=str(DEFAULT_OUTPUT), help="the archive to write (.tar.gz)")
    parser.add_argument("--python", default=_base_interpreter(),
                        help="the base interpreter; the same path must exist on every node (default: %(default)s)")
    parser.add_argument("--extras", default="", help="comma-separated extras of the project, e.g. kerberos")
    parser.add_argument("--with-pyspark", action="store_true",
                        help="also pack pyspark and py4j (only for a cluster whose Spark does not provide them)")
    parser.add_argument("--spark-line", choices=sorted(RUNTIME_LOCKS), default=os.environ.get("ETL_SPARK_LINE", "4"),
                        help="the Spark line whose runtime lock is packed (default: %(default)s)")
    parser.add_argument("--force", action="store_true", help="rebuild even if the archive is up to date")
    parser.add_argument("--no-check", action="store_true", help="skip the import check of the unpacked archive")
    return parser


def _base_interpreter() -> str:
    """The interpreter the running venv was made from: a venv's own bin/python is a symlink
    into the build tree, which no node has."""
    return getattr(sys, "_base_executable", sys.executable)


if __name__ == "__main__":
    sys.exit(main())
