"""The package's metadata: one version string, ranges in pyproject.toml, a lock that satisfies
them with hashes, package data that a regular install carries, and the license."""
from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from fnmatch import fnmatch
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import etl

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
PROJECT = PYPROJECT["project"]
LOCKED_EXTRAS = ("dev",)  # kerberos builds against MIT Kerberos: in requirements/kerberos.txt only
ENTRY = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>\S+)")
# One locked environment per Spark line (scripts/lock): the suffix of its three files.
LINES = pytest.mark.parametrize("line", ["", "-spark35"], ids=["spark-4", "spark-3.5"])


def lock(name: str) -> dict[str, tuple[str, int]]:
    """{canonical name: (version, number of hashes)} of a lock file."""
    entries: dict[str, tuple[str, int]] = {}
    current = None
    for line in (REPO / "requirements" / name).read_text(encoding="utf-8").splitlines():
        found = ENTRY.match(line)
        if found:
            current = canonicalize_name(found["name"])
            entries[current] = (found["version"], 0)
        elif line.strip().startswith("--hash=sha256:") and current:
            entries[current] = (entries[current][0], entries[current][1] + 1)
    return entries


def test_python_m_etl_version_prints_the_installed_distributions_version():
    result = subprocess.run([sys.executable, "-m", "etl", "--version"], capture_output=True, text=True, cwd="/")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"etl {metadata.version('kafka-hive-etl')}\n"


def test_the_version_is_written_once():
    assert PROJECT["dynamic"] == ["version"] and "version" not in PROJECT
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "etl.__version__"}
    assert metadata.version("kafka-hive-etl") == etl.__version__, "reinstall: scripts/setup"
    assert not (REPO / "setup.cfg").exists() or "version" not in (REPO / "setup.cfg").read_text()


@pytest.mark.parametrize("requirement", PROJECT["dependencies"])
def test_runtime_dependencies_are_ranges_not_pins(requirement):
    assert "==" not in str(Requirement(requirement).specifier), \
        f"{requirement}: an exact pin clashes inside Airflow or a cluster; pin it in the lock (scripts/lock)"


@LINES
def test_the_lock_pins_every_locked_requirement_within_its_range_with_hashes(line):
    locked = lock(f"lock{line}.txt")
    wanted = [*PROJECT["dependencies"],
              *(r for extra in LOCKED_EXTRAS for r in PROJECT["optional-dependencies"][extra])]
    for raw in wanted:
        requirement = Requirement(raw)
        name = canonicalize_name(requirement.name)
        assert name in locked, f"{raw} is not in requirements/lock.txt: run scripts/lock"
        assert requirement.specifier.contains(locked[name][0], prereleases=True), \
            f"requirements/lock.txt has {name}=={locked[name][0]}, outside {raw}: run scripts/lock"
    unhashed = sorted(name for name, (_, hashes) in locked.items() if not hashes)
    assert not unhashed, f"entries without hashes: {unhashed}"


@LINES
def test_the_runtime_lock_is_the_runtime_part_of_the_lock_at_the_same_versions(line):
    full, runtime = lock(f"lock{line}.txt"), lock(f"runtime{line}.txt")
    assert {name: version for name, (version, _) in runtime.items()} == \
        {name: full[name][0] for name in runtime}
    for raw in PROJECT["dependencies"]:
        assert canonicalize_name(Requirement(raw).name) in runtime
    dev_only = {canonicalize_name(Requirement(r).name) for r in PROJECT["optional-dependencies"]["dev"]}
    assert not dev_only & set(runtime), "dev tools in the runtime lock would go into pack-env's archive"


@LINES
def test_the_kerberos_lock_is_the_lock_plus_the_kerberos_extra_at_the_same_versions(line):
    full, kerberos = lock(f"lock{line}.txt"), lock(f"kerberos{line}.txt")
    assert {name: kerberos[name][0] for name in full if name in kerberos} == \
        {name: version for name, (version, _) in full.items()}, "run scripts/lock"
    for raw in PROJECT["optional-dependencies"]["kerberos"]:
        requirement = Requirement(raw)
        name = canonicalize_name(requirement.name)
        assert name in kerberos and requirement.specifier.contains(kerberos[name][0]), f"{raw}: run scripts/lock"
    assert not sorted(name for name, (_, hashes) in kerberos.items() if not hashes)


def test_the_spark_35_lock_is_the_default_lock_but_for_pyspark_35():
    """What setup installs by default is the 4.x line; ETL_SPARK_LINE=3.5 changes pyspark alone
    (and py4j, should 3.5.x pin another), to the Spark line etl.spark_line knows as 3.5."""
    from etl.spark_line import SPARK_4, SPARK_35, line_of
    default, spark35 = lock("lock.txt"), lock("lock-spark35.txt")
    assert line_of(default["pyspark"][0]) is SPARK_4 and line_of(spark35["pyspark"][0]) is SPARK_35
    differ = {name for name in default.keys() | spark35.keys()
              if default.get(name, ("",))[0] != spark35.get(name, ("",))[0]}
    assert differ - {"py4j"} == {"pyspark"}, "run scripts/lock"


def test_every_data_file_of_the_package_is_package_data():
    tracked = subprocess.run(["git", "ls-files", "etl"], cwd=REPO, capture_output=True, text=True, check=True)
    data = [Path(name) for name in tracked.stdout.split() if not name.endswith(".py")]
    patterns = PYPROJECT["tool"]["setuptools"]["package-data"]

    def covered(path: Path) -> bool:
        package = ".".join(path.parent.parts)
        return any(fnmatch(path.name, pattern) for key in (package, "*") for pattern in patterns.get(key, ()))
    assert [path for path in data if not covered(path)] == []
    assert Path("etl/hive/rejected.sql") in data


def test_the_license_is_apache_2_and_matches_the_metadata():
    text = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert PROJECT["license"] == "Apache-2.0"
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert text.startswith("Copyright ")
