"""What goes into the archive: the project's files, its requirements, and the key that says
whether an archive already built from them can be reused."""
from __future__ import annotations

import hashlib
import json
import re
import subprocess
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_FILES = ("pyproject.toml", "README.md", "LICENSE")  # README: the long description
# The runtime lock of each Spark line (etl/spark_line.py), as scripts/lock writes them; "4" is the
# default. Without --with-pyspark they pin the same packages, but the line is still the archive's.
RUNTIME_LOCKS = {"4": "requirements/runtime.txt", "3.5": "requirements/runtime-spark35.txt"}
PACKAGE_DIRS = ("etl",)
LEFT_TO_THE_CLUSTER = ("pyspark", "py4j")  # provided on PYTHONPATH by the cluster's spark-submit
REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def package_sources() -> list[Path]:
    """The files a wheel of the project is built from (relative to the repository)."""
    files = [Path(name) for name in PACKAGE_FILES]
    for folder in PACKAGE_DIRS:
        files += sorted(p.relative_to(ROOT) for p in (ROOT / folder).rglob("*")
                        if p.is_file() and "__pycache__" not in p.parts)
    return files


def packer_sources() -> list[Path]:
    """The packer's own code (relative to the repository): a change to how the archive is made
    rebuilds it as surely as a change to what goes in."""
    package = Path(__file__).resolve().parent
    return [Path("scripts", "pack_env.py"), *sorted(p.relative_to(ROOT) for p in package.glob("*.py"))]


def cache_key(python: Path, extras: tuple[str, ...], with_pyspark: bool, spark_line: str = "4") -> str:
    digest = hashlib.sha256()
    for path in [*package_sources(), Path(RUNTIME_LOCKS[spark_line]), *packer_sources()]:
        digest.update(str(path).encode() + b"\0" + (ROOT / path).read_bytes() + b"\0")
    version = subprocess.run([str(python), "-c", "import sys; print(sys.version)"], check=True,
                             capture_output=True, text=True).stdout
    digest.update(json.dumps([str(python), version, extras, with_pyspark]).encode())
    return digest.hexdigest()


def requirements(extras: tuple[str, ...], with_pyspark: bool, spark_line: str = "4") -> tuple[list[str], list[str]]:
    """What to install: the Spark line's runtime lock's entries (each a requirement line with its
    hashes), less what the cluster provides; and the extras' requirement ranges from
    pyproject.toml, which the lock does not hold (kerberos builds against the machine's MIT Kerberos)."""
    locked = [entry for entry in _lock_entries(ROOT / RUNTIME_LOCKS[spark_line])
              if with_pyspark or REQUIREMENT_NAME.match(entry).group(1).lower() not in LEFT_TO_THE_CLUSTER]
    known = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    extra_lines: list[str] = []
    for extra in extras:
        if extra not in known or extra == "dev":
            raise SystemExit(f"pack-env: no extra {extra!r} to pack; "
                             f"known: {', '.join(e for e in known if e != 'dev')}")
        extra_lines += known[extra]
    return locked, extra_lines


def _lock_entries(lock: Path) -> list[str]:
    """pip-compile's entries: a `name==version \\` line, its `--hash` lines, its `# via` comments."""
    entries: list[str] = []
    for line in lock.read_text(encoding="utf-8").splitlines():
        if REQUIREMENT_NAME.match(line) and not line.startswith(" "):
            entries.append(line)
        elif line.strip().startswith("--hash") and entries:
            entries[-1] += "\n" + line
    return entries
