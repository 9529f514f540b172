"""The one escaper for user-supplied strings in Markdown (case ids, tags, metric names, errors).

GitHub renders comments as GitHub Flavored Markdown with a subset of HTML, and turns
``@name`` into a notification. A user string must render as the literal text it is, inside a
table cell or a sentence, and must not ping anybody or inject markup:

- line breaks and other control characters become spaces (a newline would end a table row);
- ``& < >`` become entities, so no raw HTML (``<img>``, ``<details>``, comments) survives;
- ``@`` becomes ``&#64;``, which renders as "@" but is not a mention;
- ``|`` and the characters of inline markup (emphasis, code, links, images, strike-through)
  get a backslash, so ``| ---`` cannot split a cell;
- a leading character that would start a heading, list, rule or numbered item at the start
  of a line (``# + - =`` or ``1.``) gets a backslash too.
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029\u0085]+")
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "@": "&#64;"}
_BACKSLASHED = set("\\`*_{}[]()!|~")
_LINE_START = re.compile(r"^(?:[#+=-]|\d+[.)])")
_MAX_LEN = 300


def md_escape(text: object, *, max_len: int = _MAX_LEN) -> str:
    """``text`` as inert Markdown: safe in a table cell, a list item or a sentence.

    Longer strings are cut to ``max_len`` characters (before escaping) and end with "…".
    """
    s = _CONTROL.sub(" ", str(text)).strip()
    if len(s) > max_len:
        s = s[: max_len - 1] + "…"
    out = []
    lead = _LINE_START.match(s)
    if lead:
        # Escape the marker's last character: "\#", "\-", "12\." are literal text.
        out.append(s[: lead.end() - 1] + "\\" + s[lead.end() - 1])
        s = s[lead.end() :]
    for ch in s:
        if ch in _ENTITIES:
            out.append(_ENTITIES[ch])
        elif ch in _BACKSLASHED:
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)
