"""Every relative link in README.md and docs/ points to a file of the repository.

A page moved or renamed would otherwise leave links that GitHub renders as 404s. Anchors are
not checked (GitHub derives them from headings, and a wrong one still lands on the page);
links to other sites are not followed.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FENCE_RE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
LINK_RE = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
EXTERNAL_RE = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)  # http:, https:, mailto:, ...


def pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def relative_links(page: Path) -> list[str]:
    """The relative targets the page links to, outside fenced code blocks, anchors removed."""
    text = FENCE_RE.sub("", page.read_text(encoding="utf-8"))
    targets = (match.group(1) for match in LINK_RE.finditer(text))
    return [target.split("#", 1)[0] for target in targets
            if not EXTERNAL_RE.match(target) and not target.startswith("#")]


@pytest.mark.parametrize("page", pages(), ids=lambda page: str(page.relative_to(REPO)))
def test_relative_links_resolve(page: Path) -> None:
    missing = [target for target in relative_links(page) if not (page.parent / target).exists()]
    assert not missing, f"{page.relative_to(REPO)} links to files that do not exist: {missing}"


def test_links_are_found_and_checked(tmp_path: Path) -> None:
    """The extraction itself: a link in prose counts, one in a code block or to a site does not."""
    page = tmp_path / "page.md"
    page.write_text("See [a](a.md#x), ![pic](img/p.png) and [site](https://example.com).\n"
                    "```text\n[not](inside.md)\n```\n[top](#anchor)\n", encoding="utf-8")
    assert relative_links(page) == ["a.md", "img/p.png"]
