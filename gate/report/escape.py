"""The one escaper for user-supplied strings in Markdown (case ids, tags, metadata, answers).

GitHub renders comments as GitHub Flavored Markdown (cmark-gfm with the table, autolink and
strike-through extensions, a subset of HTML), then runs filters over the HTML *text*: ``@name``
and ``@org/team`` become notifications, ``#12``, ``owner/repo#3`` and ``GH-4`` become
cross-references. A user string must render as the literal text it is, inside a table cell or
a sentence, and must not ping anybody, link anywhere or inject markup:

- Unicode format characters (category Cf: bidi embeddings and overrides such as U+202E,
  isolates, zero-width space/joiner, BOM, soft hyphen) are removed first, so text cannot be
  reordered or hide a mention/link split the renderer would see differently;
- line breaks and other control characters become spaces (a newline would end a table row);
- ``& < >`` become entities, so no raw HTML (``<img>``, ``<details>``, comments, ``<url>``
  autolinks) survives;
- ``@`` is followed by a zero-width space (U+200B), the way other bots quote handles: the text
  still reads "@team", but no mention pattern (``@`` then a letter or digit) and no e-mail
  autolink (``a@b.c``) exists in the HTML text. (``&#64;`` is not enough: the renderer turns
  it back into ``@`` before the mention filter sees the text);
- references get the same zero-width space: ``#`` before a digit where GitHub sees a
  reference (``#12`` after a space or punctuation, ``owner/repo#3``; not ``chunk#0``), ``GH-``
  before a digit, and URL starts (``scheme:`` before ``//``, ``www.``), so neither the
  autolink extension nor the reference filter finds a link;
- ``|`` and the characters of inline markup (emphasis, code, links, images, strike-through)
  get a backslash, so ``| ---`` cannot split a cell;
- a leading character that would start a heading, list, rule or numbered item at the start
  of a line (``# + - =`` or ``1.``) gets a backslash too.

Our own inserted zero-width spaces are added after the format characters are removed, so they
are the only ones in the output.
"""

from __future__ import annotations

import re
import unicodedata

ZWSP = "\u200b"
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029\u0085]+")
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_BACKSLASHED = set("\\`*_{}[]()!|~")
_LINE_START = re.compile(r"^(?:[#+=-]|\d+[.)])")
# Where a zero-width space goes (between group 1 and what follows): after "@"; after "#" or
# "GH-" before a digit; inside "scheme://" and "www." (case-insensitive, as the filters are).
_BREAK = re.compile(r"(@)|(#)(?=\d)|\b(gh)(?=-\d)|([a-z][a-z0-9+.-]*:)(?=//)|(www)(?=\.)", re.IGNORECASE)
# "#12" is a reference after a non-word character, and after "owner/repo"; "chunk#0" is not.
_WORD_BEFORE = re.compile(r"\w$")
_REPO_BEFORE = re.compile(r"[\w.-]+/[\w.-]+$")
_MAX_LEN = 300


def strip_format(text: str) -> str:
    """``text`` without Unicode format characters (category Cf)."""
    if text.isascii():
        return text
    return "".join(ch for ch in text if unicodedata.category(ch) != "Cf")


def inert_text(text: object) -> str:
    """Plain text that no GitHub filter turns into a mention, reference or link.

    Removes format characters and control characters (as spaces), then puts a zero-width
    space after ``@``, after ``#``/``GH`` before a digit and inside URL starts. For places
    that are not Markdown (a check run's title is plain text, but GitHub still links in it).
    """
    s = _CONTROL.sub(" ", strip_format(str(text)))
    return _BREAK.sub(lambda m: m.group(0) + ZWSP if _is_link(s, m) else m.group(0), s)


def _is_link(s: str, match: re.Match[str]) -> bool:
    """Whether a ``_BREAK`` match would be found by GitHub (``#`` only at a reference's start)."""
    if match.group(2) is None:
        return True
    before = s[: match.start()]
    return not _WORD_BEFORE.search(before) or bool(_REPO_BEFORE.search(before))


def md_escape(text: object, *, max_len: int = _MAX_LEN) -> str:
    """``text`` as inert Markdown: safe in a table cell, a list item or a sentence.

    Longer strings are cut to ``max_len`` characters (before escaping) and end with "…".
    """
    s = _CONTROL.sub(" ", strip_format(str(text))).strip()
    if len(s) > max_len:
        s = s[: max_len - 1] + "…"
    out = []
    lead = _LINE_START.match(s)
    if lead:
        # Escape the marker's last character: "\#", "\-", "12\." are literal text.
        out.append(s[: lead.end() - 1] + "\\" + s[lead.end() - 1])
        if s[lead.end() - 1] == "#" and s[lead.end() : lead.end() + 1].isdigit():
            out.append(ZWSP)
        s = s[lead.end() :]
    breaks = {m.end(m.lastindex or 0) for m in _BREAK.finditer(s) if _is_link(s, m)}
    for i, ch in enumerate(s):
        if i in breaks:
            out.append(ZWSP)
        if ch in _ENTITIES:
            out.append(_ENTITIES[ch])
        elif ch in _BACKSLASHED:
            out.append("\\" + ch)
        else:
            out.append(ch)
    if len(s) in breaks:
        out.append(ZWSP)
    return "".join(out)
