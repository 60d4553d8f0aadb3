"""The README stays short enough to read in ten minutes, and the documentation's links work.

README.md is for the person about to run Keepsake; the rest lives in docs/ and is linked
from it (STYLE.md). A link that points at a file or heading that does not exist is a
newcomer's dead end, so every relative link (and its #anchor, when it has one) in README.md
and docs/*.md must resolve.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCUMENTS = [README, *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 600

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*```")


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks (a `[x](y)` inside code is not a link)."""
    lines, in_code = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            in_code = not in_code
            continue
        if not in_code:
            lines.append(line)
    return lines


def anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, -1 for repeats."""
    seen: dict[str, int] = {}
    found = set()
    for line in prose_lines(path.read_text()):
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not heading:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def relative_links(path: Path) -> list[str]:
    targets = []
    for line in prose_lines(path.read_text()):
        for target in LINK.findall(line):
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: …
                targets.append(target)
    return targets


def test_readme_is_at_most_600_lines():
    lines = len(README.read_text().splitlines())
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines (at most {README_MAX_LINES}): move details to docs/ and link them"
    )


def test_the_readme_links_every_document_in_docs():
    readme = README.read_text()
    for document in DOCUMENTS[1:]:
        assert f"docs/{document.name}" in readme, f"README.md does not link docs/{document.name}"


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_relative_link_resolves(document: Path):
    broken = []
    for target in relative_links(document):
        file_part, _, anchor = target.partition("#")
        linked = (document.parent / file_part).resolve() if file_part else document
        if not linked.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target} (no heading #{anchor} in {linked.relative_to(ROOT)})")
    assert broken == [], f"{document.relative_to(ROOT)} has broken links: {broken}"


def test_the_link_checker_sees_broken_links(tmp_path: Path):
    page = tmp_path / "page.md"
    page.write_text(
        "# A page\n\n## Two words\n\n[ok](#two-words) [gone](missing.md) [bad](#nowhere)\n"
        "```sh\n[not a link](nowhere.md)\n```\n[web](https://example.org/x)\n"
    )
    assert relative_links(page) == ["#two-words", "missing.md", "#nowhere"]
    assert anchors(page) == {"a-page", "two-words"}
