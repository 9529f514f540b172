"""User strings in the comment, rendered by cmark-gfm as GitHub renders them: inert text only.

Each hostile string goes through :func:`gate.report.escape.md_escape` into a table cell and a
paragraph; the HTML must hold no link, no tag of the string's own, no mention or reference
pattern in its text, no format character but the zero-width spaces the escaper puts in, and
the table must keep its cells.
"""

from __future__ import annotations

import unicodedata

import pytest
from render_helpers import MENTION, REFERENCE, cmark, parts

from gate.report.escape import ZWSP, inert_text, md_escape, strip_format

HOSTILE = [
    "@org/team please look",
    "cc @alice and @bob-2",
    "fixes #123 and owner/repo#1 and GH-4",
    "see https://evil.example/x?a=1 or http://t.co and www.evil.example",
    "mail admin@evil.example or mailto:root@evil.example",
    "<https://evil.example> <admin@evil.example>",
    "[click](https://evil.example) ![img](https://evil.example/p.png)",
    "a | b | c\n| --- |\nnew row",
    "`code` and ```fence``` and <b>bold</b> <img src=x onerror=alert(1)>",
    "<details><summary>x</summary>",
    "<!-- ragproof:gate -->",
    "right\u202eto-left\u2066isolate\u2069 zero\u200bwidth\u200d\ufeffbom",
    "#12 at the start",
    "x #1, (#2), o/r#3, a.b/c-d#4",
    "&#64;team and &commat;team",
    "~~strike~~ **bold** _em_",
    "\u0040\u200bteam @\u2060team",
]


def _render(user: str) -> str:
    cell = md_escape(user)
    return cmark(f"| Case | Value |\n|---|---|\n| {cell} | x |\n\nParagraph: {cell}\n")


@pytest.mark.parametrize("user", HOSTILE)
def test_hostile_string_renders_as_inert_text(user: str) -> None:
    rendered = _render(user)
    p = parts(rendered)
    text = "".join(p.text)
    assert p.hrefs == [], rendered
    assert set(p.tags) <= {"table", "thead", "tbody", "tr", "th", "td", "p"}, rendered
    assert not MENTION.search(text), text
    assert not REFERENCE.search(text), text
    assert "://" not in text and "www." not in text.lower()
    assert all(unicodedata.category(ch) != "Cf" or ch == ZWSP for ch in text)
    # One row, two cells: no pipe or newline in the string split or ended it.
    assert rendered.count("<tr>") == 2 and rendered.count("<td>") == 2
    # The reader sees the string itself: without our zero-width spaces it is the original,
    # format characters removed, line breaks as spaces.
    cell = rendered.split("<td>")[1].split("</td>")[0]
    visible = "".join(parts(cell).text).replace(ZWSP, "")
    assert visible == " ".join(strip_format(user).split("\n")).strip()


def test_mentions_references_and_links_get_a_zero_width_space() -> None:
    assert md_escape("@org/team") == f"@{ZWSP}org/team"
    assert md_escape("(#12) GH-3 gh-4 #x") == f"\\(#{ZWSP}12\\) GH{ZWSP}-3 gh{ZWSP}-4 #x"
    assert md_escape("o/r#5 o.x/r-y#6") == f"o/r#{ZWSP}5 o.x/r-y#{ZWSP}6"
    # Not references: a chunk id "doc#0", "x_#1", "xGH-1" stay as they are (ids copy cleanly).
    assert md_escape("doc#0 x_#1 xGH-1") == "doc#0 x\\_#1 xGH-1"
    assert md_escape("a-#1") == f"a-#{ZWSP}1"
    assert md_escape("#12") == f"\\#{ZWSP}12"
    assert md_escape("https://x.y") == f"https:{ZWSP}//x.y"
    assert md_escape("WWW.x.y") == f"WWW{ZWSP}.x.y"
    assert md_escape("a@b.c") == f"a@{ZWSP}b.c"
    assert md_escape("ends with @") == f"ends with @{ZWSP}"
    assert md_escape("x\u202ey\u200bz") == "xyz"
    assert inert_text("@team fixes #4\n") == f"@{ZWSP}team fixes #{ZWSP}4 "


def test_plain_strings_are_unchanged() -> None:
    for plain in ("topic:billing", "inst-01", "answer.exact_match", "tags=topic:security", "p95 0.5"):
        assert md_escape(plain) == plain.replace("_", "\\_")
