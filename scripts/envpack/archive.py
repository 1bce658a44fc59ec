"""The tar.gz: written from the venv, then unpacked and checked as an executor would use it."""
from __future__ import annotations

import json
import os
import subprocess
import tarfile
import tempfile
from pathlib import Path

# What an executor must be able to import from the archive alone (the check after packing).
IMPORT_CHECK = """
import json, sys
import etl, etl.job.tasks, etl.source.kafka, etl.job.partition_writer, kazoo, pyarrow, confluent_kafka, numpy, hdfs
from etl.hive.registrar import REJECTED_DDL
assert REJECTED_DDL.is_file(), f"package data missing: {REJECTED_DDL}"
print(json.dumps({"etl": etl.__file__, "executable": sys.executable, "version": sys.version.split()[0]}))
"""


def write_archive(venv: Path, output: Path) -> None:
    """tar.gz of the venv's contents (no top folder: Spark unpacks it into `#environment`),
    written beside the output and renamed into place, so a crash never leaves half an archive."""
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(f"_tmp.{output.name}")
    with tarfile.open(partial, "w:gz", compresslevel=6) as tar:
        for entry in sorted(venv.iterdir()):
            tar.add(entry, arcname=entry.name, filter=_only_the_interpreter_in_bin)
    os.replace(partial, output)


def _only_the_interpreter_in_bin(member: tarfile.TarInfo):
    """bin/ keeps python* (symlinks, kept as symlinks); the console scripts and activate
    scripts name the build folder in their first line and would not run on a node."""
    parts = member.name.split("/")
    if len(parts) == 2 and parts[0] == "bin" and not parts[1].startswith("python"):
        return None
    return member


def check_archive(archive: Path) -> dict:
    """Unpack the archive as Spark would and import the job from it, with no PYTHONPATH and
    outside the repository: proves it is complete and does not lean on .venv or the repo."""
    with tempfile.TemporaryDirectory(prefix="pack-env-check-") as scratch:
        environment = Path(scratch) / "environment"
        with tarfile.open(archive) as tar:
            tar.extractall(environment, filter="tar")
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
        result = subprocess.run([str(environment / "bin" / "python"), "-c", IMPORT_CHECK], cwd=scratch, env=env,
                                capture_output=True, text=True)
        if result.returncode != 0:
            raise SystemExit(f"pack-env: the unpacked archive cannot import the job:\n{result.stderr}")
        found = json.loads(result.stdout)
        if not found["etl"].startswith(str(environment)):
            raise SystemExit(f"pack-env: etl was imported from {found['etl']}, not from the archive")
        return found
