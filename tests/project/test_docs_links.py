"""Every relative link of the documentation resolves: ``](path)`` names a file or directory of the
repository, and ``](path#anchor)`` / ``](#anchor)`` a heading (or an explicit ``id``) of that file.

Headings get GitHub's anchors: the heading's text lower-cased, every character that is not a
letter, digit, underscore, hyphen or space dropped, spaces turned into hyphens, and ``-1``,
``-2``, ... added to repeats. Links inside code (fenced blocks, backticks) are not links.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted(
    [ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "examples" / "demo" / "README.md"]
    + list((ROOT / "docs").rglob("*.md"))
    + [ROOT / "gate" / "judge" / "fixtures" / "README.md"]
)
FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)
CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)", re.S)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.M)
EXPLICIT_ID = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"", re.I)
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)  # https:, mailto:, ...


def _prose(markdown: str) -> str:
    """The text outside fenced code blocks and code spans."""
    return CODE_SPAN.sub("", FENCE.sub("", markdown))


def _slug(heading: str) -> str:
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8")
    seen: dict[str, int] = {}
    found = set(EXPLICIT_ID.findall(text))
    for heading in HEADING.findall(FENCE.sub("", text)):
        slug = _slug(heading)
        found.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return found


def broken_links(path: Path, root: Path = ROOT) -> list[str]:
    """Every relative link of ``path`` that names no file, or an anchor its file lacks."""
    broken = []
    for target in LINK.findall(_prose(path.read_text(encoding="utf-8"))):
        if EXTERNAL.match(target):
            continue
        file_part, _, anchor = target.partition("#")
        resolved = (path.parent / file_part).resolve() if file_part else path
        if not resolved.is_relative_to(root.resolve()):
            broken.append(f"{target}: outside the repository")
        elif not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target}: no heading #{anchor} in {resolved.relative_to(root.resolve())}")
    return broken


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(path: Path) -> None:
    assert broken_links(path) == []


def test_the_check_sees_a_missing_file_and_a_missing_heading(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "b.md").write_text("# Title\n\n## The `--json` document\n\n## Usage\n\n## Usage\n")
    page = tmp_path / "a.md"
    page.write_text(
        "[ok](docs/b.md) [ok](docs/b.md#the---json-document) [ok](docs/b.md#usage-1) [ok](#top)\n"
        "[gone](docs/c.md) [bad anchor](docs/b.md#nothing) [outside](../x.md)\n"
        "[web](https://example.com/x.md) `[code](nowhere.md)`\n\n"
        '```\n[fenced](nowhere.md)\n```\n\n<a id="top"></a>\n'
    )
    assert broken_links(page, tmp_path) == [
        "docs/c.md: no such file",
        "docs/b.md#nothing: no heading #nothing in docs/b.md",
        "../x.md: outside the repository",
    ]
