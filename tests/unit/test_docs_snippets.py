"""Every INI snippet in the README and docs/, and every config file in conf/, parses as
written with the job's own INI reader (etl.config.ini: the same comments, no interpolation, the
same refusal of a comment after a secret). A snippet is a fragment, so only its syntax is
checked, not that it names every required key; one that starts with keys and no [section]
is read as if a section header stood before it."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from etl.config.ini import parse_ini
from etl.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)")
FRAGMENT_HEADER = "[fragment]\n"


def markdown_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def ini_snippets(text: str) -> list[tuple[int, str]]:
    """(line number of the snippet's first line, its text) for each ```ini fenced block."""
    snippets, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        i += 1
        if not opening:
            continue
        fence, body, first = opening["fence"], [], i + 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][len(opening["indent"]):] if lines[i].startswith(opening["indent"]) else lines[i])
            i += 1
        i += 1  # the closing fence
        if opening["lang"].lower() in ("ini", "cfg", "conf", "dosini"):
            snippets.append((first, "\n".join(body) + "\n"))
    return snippets


def syntax_errors(snippet: str, source: str, first_line: int) -> list[str]:
    """The snippet's errors as `source:line: message`, with the line in the source file."""
    starts_with_keys = next((line.strip() for line in snippet.splitlines()
                             if line.strip() and not line.strip().startswith(("#", ";"))), "[").startswith("[") is False
    text, offset = (FRAGMENT_HEADER + snippet, first_line - 2) if starts_with_keys else (snippet, first_line - 1)
    try:
        parse_ini(text, source)
    except ConfigError as exc:
        return [f"{source}:{_error_line(str(exc), snippet, first_line, offset)}: {exc}"]
    return []


def _error_line(message: str, snippet: str, first_line: int, offset: int) -> int:
    """configparser's line number, else the line of the `[section] key:` the message names."""
    found = re.search(r"\[line\s+(\d+)\]|line: (\d+)", message)
    if found:
        return int(found.group(1) or found.group(2)) + offset
    key = re.search(r"\] (\S+): ", message)
    lines = snippet.splitlines()
    at = next((n for n, line in enumerate(lines) if key and re.match(rf"\s*{re.escape(key.group(1))}\s*=", line)), 0)
    return first_line + at


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_ini_snippet_in_the_docs_parses(path):
    source = str(path.relative_to(REPO))
    errors = [error for first, snippet in ini_snippets(path.read_text(encoding="utf-8"))
              for error in syntax_errors(snippet, source, first)]
    assert not errors, "INI snippets that the job's reader refuses:\n" + "\n".join(errors)


@pytest.mark.parametrize("path", sorted((REPO / "conf").rglob("*.ini")), ids=lambda p: str(p.relative_to(REPO)))
def test_every_config_file_in_conf_parses(path):
    source = str(path.relative_to(REPO))
    assert not syntax_errors(path.read_text(encoding="utf-8"), source, 1)


def test_the_checker_finds_a_bad_snippet_and_names_its_line():
    doc = "Intro\n\n```ini\n[kafka]\ntopics = a\nthis line has no equals sign\n```\n"
    (first, snippet), = ini_snippets(doc)
    errors = syntax_errors(snippet, "doc.md", first)
    assert len(errors) == 1 and errors[0].startswith("doc.md:6: "), errors


def test_a_fragment_without_a_section_is_read_and_its_lines_counted_from_the_file():
    doc = ("```ini\nauth = digest   # none (default) | digest\n\n```\n\n"
           "```ini\n[kafka]\nsasl.password = x  # oops\n```\n")
    (first_ok, ok), (first_bad, bad) = ini_snippets(doc)
    assert syntax_errors(ok, "doc.md", first_ok) == []
    errors = syntax_errors(bad, "doc.md", first_bad)
    assert len(errors) == 1 and errors[0].startswith("doc.md:8: ") and "secret" in errors[0], errors


def test_the_readmes_minimal_config_is_a_whole_config_the_job_loads(tmp_path):
    """The README's "On your own cluster" INI names every key a job needs (its DDL file aside,
    which the test puts in its place)."""
    from etl.config import load_config
    section = (REPO / "README.md").read_text().split("## On your own cluster", 1)[1].split("\n## ", 1)[0]
    (_line, snippet), = ini_snippets(section)
    ddl = tmp_path / "clicks.sql"
    ddl.write_text((REPO / "warehouse_schema" / "events.sql").read_text())
    config = tmp_path / "clicks.ini"
    config.write_text(snippet.replace("/etc/etl/clicks.sql", str(ddl)))
    loaded = load_config(config)
    assert (loaded.job.name, loaded.kafka.topics, loaded.hive.table) == ("clicks", ("clicks",), "clicks")
