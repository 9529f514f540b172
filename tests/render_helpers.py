"""Render Markdown the way GitHub does, for the report tests.

``cmark-gfm`` (the reference implementation of GitHub Flavored Markdown, Debian package
``cmark-gfm``) turns the comment into HTML; ``github-markdown-css`` (vendored in
tests/data/github-markdown-css) styles it; headless Chromium lays it out at a given width,
takes screenshots and measures the DOM. ``.ci/run`` installs both programs; without them the
tests skip, unless RAGPROOF_REQUIRE_RENDERER=1 (CI), where a missing program is a failure.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, cast

import pytest
from tools import missing_message

DATA = Path(__file__).parent / "data"
GITHUB_CSS = DATA / "github-markdown-css" / "github-markdown-light.css"
CMARK = "cmark-gfm"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")

# A user-visible mention as GitHub's filter finds it in the HTML text: "@" then a letter/digit.
MENTION = re.compile(r"(?<![A-Za-z0-9_.`])@[A-Za-z0-9]")
# "#12", "owner/repo#3", "GH-4": cross-references in the HTML text.
REFERENCE = re.compile(r"(?<![A-Za-z0-9_&])#\d|\bGH-\d", re.IGNORECASE)


def require(program: str | tuple[str, ...]) -> str:
    """The path of ``program`` (or the first of several names), else skip (or fail in CI)."""
    names = (program,) if isinstance(program, str) else program
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    reason = missing_message(names[0])
    if os.environ.get("RAGPROOF_REQUIRE_RENDERER") == "1":
        pytest.fail(f"RAGPROOF_REQUIRE_RENDERER=1 but {reason}")
    pytest.skip(reason)


def cmark(markdown: str) -> str:
    """HTML as GitHub renders a comment body (raw HTML kept: GitHub sanitises, it does not drop)."""
    proc = subprocess.run(
        [require(CMARK), "--unsafe", "-e", "table", "-e", "autolink", "-e", "strikethrough"],
        input=markdown,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return proc.stdout


class _Parts(HTMLParser):
    """Collects text, tags and link targets of an HTML fragment."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.text: list[str] = []
        self.tags: list[str] = []
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag == "a":
            self.hrefs.append(dict(attrs).get("href") or "")

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parts(fragment: str) -> _Parts:
    parser = _Parts()
    parser.feed(fragment)
    parser.close()
    return parser


def page(body_html: str, width: int) -> str:
    """A standalone page: github-markdown-css, a comment-wide ``.markdown-body``, the HTML."""
    css = GITHUB_CSS.read_text(encoding="utf-8")
    # A pull-request comment's body: the column is `width` px, the comment box has a 1 px
    # border and 16 px padding around the rendered Markdown (GitHub's timeline comment).
    return f"""<!doctype html><html><head><meta charset="utf-8"><style>{css}
html, body {{ margin: 0; background: #fff; }}
#comment {{ box-sizing: border-box; width: {width}px; border: 1px solid #d1d9e0; border-radius: 6px; }}
#comment > .markdown-body {{ padding: 16px; }}
</style></head><body><div id="comment"><div class="markdown-body">{body_html}</div></div></body></html>"""


MEASURE = """
<script>
(function () {
  const body = document.querySelector('.markdown-body');
  const box = body.getBoundingClientRect();
  const out = {comment: {width: box.width, height: box.height, scrollWidth: body.scrollWidth},
               tables: [], closedHeight: 0, outside: 0, visibleText: ''};
  // Tables measured with every <details> open (a closed one lays nothing out).
  for (const d of body.querySelectorAll('details')) d.open = true;
  const content = body.clientWidth - parseFloat(getComputedStyle(body).paddingLeft)
                  - parseFloat(getComputedStyle(body).paddingRight);
  out.content = content;
  for (const t of body.querySelectorAll('table')) {
    out.tables.push({scrollWidth: t.scrollWidth, clientWidth: t.clientWidth, rows: t.rows.length,
                     rowHeights: Array.from(t.rows).map(r => r.getBoundingClientRect().height)});
  }
  out.openHeight = body.getBoundingClientRect().height;
  for (const d of body.querySelectorAll('details')) d.open = false;
  out.closedHeight = body.getBoundingClientRect().height;
  // The part outside <details>: the page with every <details> element removed.
  const clone = body.cloneNode(true);
  for (const d of clone.querySelectorAll('details')) d.remove();
  clone.style.position = 'absolute'; clone.style.left = '0'; clone.style.top = '0';
  clone.style.width = box.width + 'px'; clone.style.boxSizing = 'border-box';
  document.body.appendChild(clone);
  out.outside = clone.getBoundingClientRect().height;
  out.visibleText = clone.innerText;
  out.outsideRows = Array.from(clone.querySelectorAll('tr')).map(r => r.innerText);
  clone.remove();
  const pre = document.createElement('pre');
  pre.id = 'measurements';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"""


def chromium(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    binary = require(CHROMIUM_NAMES)
    with tempfile.TemporaryDirectory(prefix="ragproof-chromium-") as profile:
        return subprocess.run(
            [
                binary,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--hide-scrollbars",
                "--force-device-scale-factor=1",
                f"--user-data-dir={profile}",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


def measure(page_html: str, width: int, workdir: Path) -> dict[str, Any]:
    """Lay the page out at ``width`` px in headless Chromium and return the script's measurements."""
    path = workdir / "measure.html"
    path.write_text(page_html.replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    proc = chromium(f"--window-size={width},1200", "--dump-dom", path.as_uri())
    match = re.search(r'<pre id="measurements">(.*?)</pre>', proc.stdout, re.DOTALL)
    assert match, f"no measurements from Chromium (exit {proc.returncode}): {proc.stderr[-2000:]}"
    return cast("dict[str, Any]", json.loads(html.unescape(match.group(1))))


def screenshot(page_html: str, width: int, height: int, png: Path) -> None:
    """A PNG of the page at ``width`` x ``height`` px."""
    with tempfile.TemporaryDirectory(prefix="ragproof-page-") as folder:
        path = Path(folder) / "page.html"
        path.write_text(page_html, encoding="utf-8")
        proc = chromium(f"--window-size={width},{height}", f"--screenshot={png}", path.as_uri())
    assert png.is_file() and png.stat().st_size > 0, proc.stderr[-2000:]


def allow_script(page_html: str, script: str) -> str:
    """``page_html`` with ``script`` appended and allowed by the page's own CSP (by its sha256),
    so a measurement runs under the same policy as the page's own script."""
    import base64
    import hashlib

    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    meta = re.search(r'(<meta http-equiv="Content-Security-Policy" content=")([^"]*)(")', page_html)
    assert meta, "the page has no Content-Security-Policy"
    policy = html.unescape(meta.group(2)).replace("script-src 'none'", "script-src")
    policy = policy.replace("script-src", f"script-src 'sha256-{digest}'", 1)
    patched = page_html[: meta.start(2)] + html.escape(policy, quote=True) + page_html[meta.end(2) :]
    return patched.replace("</body>", f"<script>{script}</script></body>")


def run_page(page_html: str, width: int, height: int, workdir: Path) -> dict[str, Any]:
    """Load a page in headless Chromium and return the JSON its scripts left in ``#measurements``."""
    path = workdir / "page.html"
    path.write_text(page_html, encoding="utf-8")
    proc = chromium(f"--window-size={width},{height}", "--dump-dom", path.as_uri())
    match = re.search(r'<pre id="measurements">(.*?)</pre>', proc.stdout, re.DOTALL)
    assert match, f"no measurements from Chromium (exit {proc.returncode}): {proc.stderr[-2000:]}"
    return cast("dict[str, Any]", json.loads(html.unescape(match.group(1))))
