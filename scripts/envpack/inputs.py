"""What goes into the archive: the project's files, its requirements, and the key that says
whether an archive already built from them can be reused."""
from __future__ import annotations

import configparser
import hashlib
import json
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_FILES = ("setup.cfg", "pyproject.toml", "README.md")  # README: setup.cfg's long_description
PACKAGE_DIRS = ("etl",)
LEFT_TO_THE_CLUSTER = ("pyspark",)  # provided on PYTHONPATH by the cluster's spark-submit
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


def cache_key(python: Path, extras: tuple[str, ...], with_pyspark: bool) -> str:
    digest = hashlib.sha256()
    for path in [*package_sources(), *packer_sources()]:
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
