"""Every ``type: ignore`` names its error code and says why the checker cannot see what the code
guarantees (mypy runs in strict mode over gate/ and tests/)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
IGNORE = re.compile(r"#\s*type:\s*ignore(?P<codes>\[[^\]]*\])?(?P<rest>.*)$")


def unexplained(text: str) -> list[int]:
    """Lines whose ``type: ignore`` has no error code or no comment after it."""
    lines = []
    for number, line in enumerate(text.splitlines(), 1):
        found = IGNORE.search(line)
        if found and (not found["codes"] or not found["rest"].strip().startswith("#")):
            lines.append(number)
    return lines


def test_every_type_ignore_says_why() -> None:
    bare = [
        f"{path.relative_to(ROOT)}:{number}"
        for folder in ("gate", "tests", "scripts", "bench")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for number in unexplained(path.read_text(encoding="utf-8"))
    ]
    assert bare == [], "add the error code and a comment saying why: " + ", ".join(bare)


def test_the_check_sees_a_bare_ignore() -> None:
    ignore = "# type" + ": ignore"  # not spelt out: this file is scanned too
    assert unexplained(f"x = f()  {ignore}[arg-type]\n") == [1]
    assert unexplained(f"x = f()  {ignore}\n") == [1]
    assert unexplained(f"x = f()  {ignore}[arg-type]  # the stub is wrong\n") == []
