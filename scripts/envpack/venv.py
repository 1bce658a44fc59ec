"""The fresh venv the archive is made of: the requirements and a regular (not editable)
install of the project, built from a clean copy of its files."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from envpack.inputs import ROOT, package_sources


def build_venv(workdir: Path, python: Path, locked: list[str], extras: list[str]) -> Path:
    """A fresh venv with the locked dependencies (exact versions, hashes checked), the extras'
    requirements, and a regular install of the project."""
    if workdir.exists():
        shutil.rmtree(workdir)
    source, venv = workdir / "src", workdir / "venv"
    _copy_sources(source)
    # No pip in the venv: the running pip installs into it (--python), so the archive carries none.
    _run([str(python), "-m", "venv", "--without-pip", str(venv)])
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
           "--quiet", "--disable-pip-version-check"]
    lock = workdir / "lock.txt"
    lock.write_text("\n".join(locked) + "\n", encoding="utf-8")
    _run([*pip, "--require-hashes", "--no-deps", "-r", str(lock)])
    if extras:  # not in the lock (docs/installing.md); pip checks them against what is there
        _run([*pip, *extras])
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
