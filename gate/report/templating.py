"""The jinja2 environment shared by the Markdown and HTML renderers (templates are package data)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from functools import cache
from typing import Any

import jinja2

from gate.report.escape import md_escape


def fmt_num(value: float | None, digits: int = 3) -> str:
    """``0.717``; ``–`` for a missing value."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    return f"{value:.{digits}f}"


def fmt_signed(value: float | None, digits: int = 3) -> str:
    """``+0.012`` / ``−0.043`` (a true minus sign, so it reads as a number, not a list marker)."""
    if value is None or not math.isfinite(value):
        return "–"
    text = f"{value:+.{digits}f}"
    if text[1:].strip("0.") == "":
        text = f"{0:.{digits}f}"
    return text.replace("-", "−")


def fmt_interval(lo: float | None, hi: float | None, digits: int = 3) -> str:
    if lo is None or hi is None:
        return "–"
    return f"[{fmt_signed(lo, digits)}, {fmt_signed(hi, digits)}]"


def axis_extent(gates: Iterable[Any], pad: float) -> float:
    """Half-width of a symmetric axis holding every gate's interval and -margin, padded by ``pad``."""
    top = 0.0
    for g in gates:
        for x in (g.lo, g.hi, g.margin):
            if x is not None and math.isfinite(x):
                top = max(top, abs(x))
    return top * pad if top > 0 else 1.0


@cache
def environment(autoescape: bool) -> jinja2.Environment:
    """``autoescape=True`` for HTML; Markdown templates escape user strings with ``| md``."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("gate.report", "templates"),
        autoescape=autoescape,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(md=md_escape, num=fmt_num, signed=fmt_signed, interval=fmt_interval)
    return env
