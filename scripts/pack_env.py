"""Pack the project and its dependencies into one archive for `spark-submit --archives`.

    scripts/pack-env [--output build/kafka-hive-etl-env.tar.gz] [--python /usr/bin/python3.11]
                     [--extras kerberos] [--with-pyspark] [--force]

The archive is a virtualenv with a regular (not editable) install of the project, made for
`--archives ENV.tar.gz#environment --conf spark.pyspark.python=./environment/bin/python`
(README "Running on a cluster"). Like venv-pack's archives it does not contain Python
itself: environment/bin/python is a symlink to the base interpreter, which must exist at the
same path, in the same version, on every node. Build it on the nodes' OS image.

pyspark and py4j are left out by default: spark-submit puts the cluster's own
$SPARK_HOME/python/lib/pyspark.zip and py4j-*.zip on the Python workers' PYTHONPATH, and
that pyspark must match the cluster's JVM side anyway. Leaving it out saves ~490 MB unpacked.

Why not venv-pack: it refuses the editable install of .venv, so a fresh venv must be built
either way, and what is left (a tar with the interpreter symlinks kept) is a few lines here.
We skip what venv-pack adds on top (rewriting the shebangs of bin/ scripts and the activate
scripts), because only bin/python is ever run from the archive; bin/ keeps nothing else.

A rebuild is skipped when the archive exists and was built from the same project files,
interpreter and options (the key is stored beside it as ARCHIVE.key).
"""
from __future__ import annotations

import argparse
import configparser
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUTPUT = ROOT / "build" / "kafka-hive-etl-env.tar.gz"
PACKAGE_FILES = ("setup.cfg", "pyproject.toml", "README.md")  # README: setup.cfg's long_description
PACKAGE_DIRS = ("etl",)
LEFT_TO_THE_CLUSTER = ("pyspark",)  # provided on PYTHONPATH by the cluster's spark-submit
REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
# What an executor must be able to import from the archive alone (the check after packing).
IMPORT_CHECK = """
import json, sys
import etl, etl.job.tasks, etl.source.kafka, etl.job.partition_writer, kazoo, pyarrow, confluent_kafka, numpy, hdfs
from etl.hive.registrar import REJECTED_DDL
assert REJECTED_DDL.is_file(), f"package data missing: {REJECTED_DDL}"
print(json.dumps({"etl": etl.__file__, "executable": sys.executable, "version": sys.version.split()[0]}))
"""


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    output = Path(args.output).resolve()
    python = Path(args.python)
    extras = tuple(sorted(e.strip() for e in args.extras.split(",") if e.strip()))
    key = cache_key(python, extras, args.with_pyspark)
    key_file = output.with_name(output.name + ".key")
    output.parent.mkdir(parents=True, exist_ok=True)
    with open(output.with_name(output.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second build at once (two test sessions) waits, then reuses
        if not args.force and key_file.is_file() and key_file.read_text().strip() == key and output.is_file():
            print(f"pack-env: {_display(output)} is up to date ({_mb(output)}); --force rebuilds it")
            return 0
        key_file.unlink(missing_ok=True)  # the key goes back only beside a complete, checked archive
        return _build(args, output, python, extras, key, key_file)


def _build(args, output: Path, python: Path, extras: tuple[str, ...], key: str, key_file: Path) -> int:
    started = time.monotonic()
    workdir = output.parent / (output.name + ".build")
    venv = build_venv(workdir, python, requirements(ROOT / "setup.cfg", extras, args.with_pyspark))
    write_archive(venv, output)
    shutil.rmtree(workdir)
    if not args.no_check:
        found = check_archive(output)
        print(f"pack-env: checked: {found['executable']} (Python {found['version']}) imports etl from the "
              f"archive ({found['etl']})")
    key_file.write_text(key + "\n")
    print(f"pack-env: wrote {_display(output)} ({_mb(output)}) in {time.monotonic() - started:.0f}s")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="scripts/pack-env", description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", default=str(DEFAULT_OUTPUT), help="the archive to write (.tar.gz)")
    parser.add_argument("--python", default=_base_interpreter(),
                        help="the base interpreter; the same path must exist on every node (default: %(default)s)")
    parser.add_argument("--extras", default="", help="comma-separated extras of the project, e.g. kerberos")
    parser.add_argument("--with-pyspark", action="store_true",
                        help="also pack pyspark and py4j (only for a cluster whose Spark does not provide them)")
    parser.add_argument("--force", action="store_true", help="rebuild even if the archive is up to date")
    parser.add_argument("--no-check", action="store_true", help="skip the import check of the unpacked archive")
    return parser


def _base_interpreter() -> str:
    """The interpreter the running venv was made from: a venv's own bin/python is a symlink
    into the build tree, which no node has."""
    return getattr(sys, "_base_executable", sys.executable)


# -- what goes in -------------------------------------------------------------------------
def package_sources() -> list[Path]:
    """The files a wheel of the project is built from (relative to the repository)."""
    files = [Path(name) for name in PACKAGE_FILES]
    for folder in PACKAGE_DIRS:
        files += sorted(p.relative_to(ROOT) for p in (ROOT / folder).rglob("*")
                        if p.is_file() and "__pycache__" not in p.parts)
    return files


def cache_key(python: Path, extras: tuple[str, ...], with_pyspark: bool) -> str:
    digest = hashlib.sha256()
    for path in [*package_sources(), Path(__file__).resolve().relative_to(ROOT)]:
        digest.update(str(path).encode() + b"\0" + (ROOT / path).read_bytes() + b"\0")
    version = subprocess.run([str(python), "-c", "import sys; print(sys.version)"], check=True,
                             capture_output=True, text=True).stdout
    digest.update(json.dumps([str(python), version, extras, with_pyspark]).encode())
    return digest.hexdigest()


def requirements(setup_cfg: Path, extras: tuple[str, ...], with_pyspark: bool) -> list[str]:
    """install_requires (and the extras' requirements) from setup.cfg, less what the cluster provides."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(setup_cfg, encoding="utf-8")
    lines = _requirement_lines(parser["options"]["install_requires"])
    known = parser["options.extras_require"] if parser.has_section("options.extras_require") else {}
    for extra in extras:
        if extra not in known:
            raise SystemExit(f"pack-env: no extra {extra!r} in setup.cfg; known: {', '.join(known)}")
        lines += _requirement_lines(known[extra])
    if with_pyspark:
        return lines
    return [line for line in lines if REQUIREMENT_NAME.match(line).group(1).lower() not in LEFT_TO_THE_CLUSTER]


def _requirement_lines(raw: str) -> list[str]:
    return [line.split("#")[0].strip() for line in raw.splitlines() if line.split("#")[0].strip()]


# -- building -------------------------------------------------------------------------------
def build_venv(workdir: Path, python: Path, reqs: list[str]) -> Path:
    """A fresh venv with the dependencies and a regular install of the project."""
    if workdir.exists():
        shutil.rmtree(workdir)
    source, venv = workdir / "src", workdir / "venv"
    _copy_sources(source)
    # No pip in the venv: the running pip installs into it (--python), so the archive carries none.
    _run([str(python), "-m", "venv", "--without-pip", str(venv)])
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
           "--quiet", "--disable-pip-version-check"]
    _run([*pip, *reqs])
    # --no-deps: the dependencies are in; this keeps pip from pulling the left-out pyspark back.
    _run([*pip, "--no-deps", str(source)])
    return venv


def _copy_sources(target: Path) -> None:
    """Build from a clean copy: setuptools reuses a build/lib of an earlier in-tree build,
    which can carry modules deleted since."""
    for path in package_sources():
        (target / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / path, target / path)


def _run(command: list[str]) -> None:
    print("pack-env: $", " ".join(command), file=sys.stderr)
    if subprocess.run(command).returncode != 0:
        raise SystemExit(f"pack-env: failed: {' '.join(command)}")


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


def _mb(path: Path) -> str:
    return f"{path.stat().st_size / 1e6:.1f} MB"


def _display(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


if __name__ == "__main__":
    sys.exit(main())
