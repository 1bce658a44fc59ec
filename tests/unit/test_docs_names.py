"""Every etl module, class or function, and every file of the repository, that the code's
docstrings and comments, the docs and the README name exists, so that a move that leaves a name
behind fails here rather than misleading a reader.

Three spellings are read from etl/**/*.py, scripts/**/*.py, docs/**/*.md and README.md:
  * dotted, `etl.job.driver` or `etl.source.kafka.KafkaMetadata.watermarks`: the longest prefix
    that is a module must exist, and the rest must be defined in it (a top-level def, class,
    assignment or import; then a class's member or an attribute it sets), read with `ast`;
  * a path from the repository, `etl/job/driver.py`, `etl/compaction/` or `tests/unit/test_x.py`
    (under etl/, tests/, scripts/ or deploy/; a `*` in it must match something);
  * a path inside the package, `job/driver.py`, where its first part is one of etl's rooms.
Names spelt like a module that are something else (table properties, Parquet footer keys, a
logger, a file name) are listed in NOT_MODULES, each with what it is.
"""
from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "etl"
ROOMS = sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists())

# Not preceded by a word, a path, `$` or `{`, so that /opt/etl/..., site-packages/etl/... and
# ${etl...} are not read as the package; not followed by `-`, so that a logger named
# etl.config.librdkafka-probe is read as what it starts with.
DOTTED_RE = re.compile(r"(?<![\w/.${-])etl(?:\.[A-Za-z_]\w*)+(?![\w-])")
REPO_PATH_RE = re.compile(r"(?<![\w/.${-])(?:etl|tests|scripts|deploy)/[\w./*-]*")
ROOM_PATH_RE = re.compile(r"(?<![\w/.${-])(?:%s)/[\w/]+\.py\b" % "|".join(ROOMS))

NOT_MODULES = {
    "etl.owner": "table property: the job that owns the table (etl.model.binding.OWNER_PROPERTY)",
    "etl.cascaded_columns": "table property (etl.hive.registrar.CASCADED_PROPERTY)",
    "etl.rollup": "table property of a rollup's partials table (etl.hive.catalog.ROLLUP_PROPERTY)",
    "etl.ranges": "footer key of a merged file, Parquet's or ORC's (etl.compaction.merge.RANGES_KEY)",
    "etl.checksums": "footer key, Parquet's or ORC's (etl.sink.checksums.CHECKSUMS_KEY)",
    "etl.unmatched": "footer key, Parquet's or ORC's (etl.job.partition_writer.UNMATCHED_METADATA_KEY)",
    "etl.ignored_fields": "footer key, Parquet's or ORC's (etl.job.partition_writer.IGNORED_FIELDS_METADATA_KEY)",
    "etl.crash": "the logger of uncaught exceptions (etl.logs)",
    "etl.ini": "a config file's name in examples",
    "etl.events": "an Airflow Asset's name in docs/scheduling.md",
}
MODULE_ATTRIBUTES = {"__file__", "__name__", "__path__", "__doc__", "__version__"}
NOT_PATHS = {
    "etl/money.proto": "a Protobuf import path in docs/testing.md, not a file of the repository",
}


def sources() -> list[Path]:
    return [*sorted(PACKAGE.rglob("*.py")), *sorted((REPO / "scripts").rglob("*.py")),
            *sorted((REPO / "docs").rglob("*.md")), REPO / "README.md"]


def named(text: str) -> tuple[set[str], set[str]]:
    """The dotted names and the paths (from the repository's root) that a text names."""
    dotted = {m.group(0) for m in DOTTED_RE.finditer(text)} - set(NOT_MODULES)
    paths = {m.group(0).rstrip("./") for m in REPO_PATH_RE.finditer(text)}
    paths |= {f"etl/{m.group(0)}" for m in ROOM_PATH_RE.finditer(text)}
    return dotted, paths - set(NOT_PATHS)


def exists(dotted: str, root: Path = REPO) -> bool:
    parts = dotted.split(".")
    depth = 1
    while depth < len(parts) and _module_file(root, parts[:depth + 1]) is not None:
        depth += 1
    module = _module_file(root, parts[:depth])
    if module is None:
        return False
    return _defined(_parse(module).body, parts[depth:])


def _module_file(root: Path, parts: list[str]) -> Path | None:
    base = root.joinpath(*parts)
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


@cache
def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def _defined(body: list[ast.stmt], names: list[str]) -> bool:
    """Whether names[0] is defined in `body`, and the rest inside it when it is a class."""
    if not names:
        return True
    found = _definitions(body).get(names[0], None if names[0] in MODULE_ATTRIBUTES else False)
    if found is False:
        return False
    if not isinstance(found, ast.ClassDef) or len(names) == 1:
        return True  # an attribute of a function's result or of a value is not read further
    if _defined(found.body, names[1:]):
        return True
    return any(isinstance(n, ast.Attribute) and n.attr == names[1] for n in ast.walk(found))


def _definitions(body: list[ast.stmt]) -> dict[str, ast.AST | None]:
    found: dict[str, ast.AST | None] = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found.update((n.id, None) for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            found.update(((a.asname or a.name).split(".")[0], None) for a in node.names)
    return found


def _path_exists(path: str) -> bool:
    return any(REPO.glob(path)) if "*" in path else (REPO / path).exists()


@pytest.mark.parametrize("source", sources(), ids=lambda path: str(path.relative_to(REPO)))
def test_every_named_module_exists(source: Path) -> None:
    dotted, paths = named(source.read_text(encoding="utf-8"))
    missing = sorted(name for name in dotted if not exists(name))
    missing += sorted(path for path in paths if not _path_exists(path))
    assert not missing, f"{source.relative_to(REPO)} names what does not exist: {missing}"


def test_a_name_left_behind_is_caught():
    text = """Moved from etl.job.compactor (see etl/job/compaction.py and sink/merge.py); the driver
    is etl.job.driver, its class etl.job.driver.Job, reading KafkaMetadata through
    etl.source.kafka.KafkaMetadata.watermarks and etl.source.kafka.KafkaMetadata.nothing_here.
    Not modules: the property etl.owner, /opt/etl/env/bin/python, ${etl.log.job}."""
    dotted, paths = named(text)
    assert sorted(name for name in dotted if not exists(name)) == [
        "etl.job.compactor", "etl.source.kafka.KafkaMetadata.nothing_here"]
    assert sorted(path for path in paths if not _path_exists(path)) == [
        "etl/job/compaction.py", "etl/sink/merge.py"]
    _, paths = named("Proved by tests/unit/test_import_layers.py, tests/integration/test_zk_*.py and "
                     "tests/unit/test_gone.py.")
    assert sorted(path for path in paths if not _path_exists(path)) == ["tests/unit/test_gone.py"]
