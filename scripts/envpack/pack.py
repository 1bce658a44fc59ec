"""One `scripts/pack-env`: reuse the archive when its key matches, else build, write and check it.
The key goes back beside the archive only once the archive is complete and checked."""
from __future__ import annotations

import fcntl
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from envpack.archive import check_archive, write_archive
from envpack.inputs import ROOT, cache_key, requirements
from envpack.venv import build_venv

DEFAULT_OUTPUT = ROOT / "build" / "kafka-hive-etl-env.tar.gz"


@dataclass(frozen=True)
class PackRequest:
    """What the command line asked for, checked and normalised."""
    output: Path  # absolute
    python: Path  # the base interpreter; the archive's bin/python links to it
    extras: tuple[str, ...]  # sorted, so the key does not depend on their order
    with_pyspark: bool
    force: bool  # rebuild even if up to date
    check: bool  # import the job from the unpacked archive after writing it
    spark_line: str = "4"  # whose runtime lock (envpack.inputs.RUNTIME_LOCKS)


def pack(request: PackRequest) -> int:
    output = request.output
    key = cache_key(request.python, request.extras, request.with_pyspark, request.spark_line)
    key_file = output.with_name(output.name + ".key")
    output.parent.mkdir(parents=True, exist_ok=True)
    with open(output.with_name(output.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second build at once (two test sessions) waits, then reuses
        if not request.force and key_file.is_file() and key_file.read_text().strip() == key and output.is_file():
            print(f"pack-env: {_display(output)} is up to date ({_mb(output)}); --force rebuilds it")
            return 0
        key_file.unlink(missing_ok=True)  # the key goes back only beside a complete, checked archive
        return _build(request, key, key_file)


def _build(request: PackRequest, key: str, key_file: Path) -> int:
    started = time.monotonic()
    output = request.output
    workdir = output.parent / (output.name + ".build")
    venv = build_venv(workdir, request.python, *requirements(request.extras, request.with_pyspark, request.spark_line))
    write_archive(venv, output)
    shutil.rmtree(workdir)
    if request.check:
        found = check_archive(output)
        print(f"pack-env: checked: {found['executable']} (Python {found['version']}) imports etl from the "
              f"archive ({found['etl']})")
    key_file.write_text(key + "\n")
    print(f"pack-env: wrote {_display(output)} ({_mb(output)}) in {time.monotonic() - started:.0f}s")
    return 0


def _mb(path: Path) -> str:
    return f"{path.stat().st_size / 1e6:.1f} MB"


def _display(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
