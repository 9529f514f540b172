"""The comment as GitHub shows it: cmark-gfm HTML, github-markdown-css, headless Chromium at 780 px.

Two comparisons: the demo's (``ragproof demo``, a real run of the bundled pipeline) and a
differently shaped one (hostile strings in every user field, family-wise intervals, a
per-metric margin, a changed dataset, six topics). For each, measured in the browser: no table
wider than the comment; the part outside ``<details>`` at most 1,200 px tall; every blocking
(metric, slice) of the ``--json`` document in the attention table there; the headline's counts
equal to the document's; for a blocking gate, a case that dropped (found here from the rows,
independently of the report) shown with its question and candidate answer; no link but our
own, no mention, no reference.

``--update-golden`` also writes docs/demo-comment.png (the README shows it).
"""

from __future__ import annotations

import re
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from gate_runs import artifact, meta, row
from render_helpers import MENTION, REFERENCE, cmark, measure, page, parts, screenshot

from gate.decision.compare import compare_runs
from gate.decision.comparison import Comparison
from gate.model.artifact import Row, RunArtifact
from gate.model.config import GateConfig, GateMetricConfig
from gate.model.records import Answer, Chunk
from gate.report.escape import ZWSP
from gate.report.markdown import ReportContext, render_markdown
from gate.run.artifact_io import read_artifact

pytestmark = pytest.mark.browser

WIDTH = 780  # a pull-request comment's column
FIRST_SCREEN = 1200
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "demo-comment.png"
HEADLINE = re.compile(
    r"(\d+) gates: (\d+) block · (\d+) review(?: · (\d+) inform only)? · (\d+) pass · (\d+) skipped"
    r"(?: · (\d+) not gating)?"
)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Comparison, RunArtifact, RunArtifact]:
    out = tmp_path_factory.mktemp("demo") / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "gate", "demo", "--out", str(out)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    comparison = Comparison.model_validate_json((out / "decision.json").read_text(encoding="utf-8"))
    return (
        (out / "comment.md").read_text(encoding="utf-8"),
        comparison,
        read_artifact(out / "baseline"),
        read_artifact(out / "candidate"),
    )


HOSTILE_TEXT = [
    "@org/team look",
    "fixes #12 and acme/rag#3, GH-4",
    "see https://evil.example/x and www.evil.example",
    "write to admin@evil.example",
    "cell | break\n| --- |",
    "<img src=x onerror=alert(1)> `tick` **bold**",
    "bidi \u202eevil\u202c zero\u200bwidth",
]


def _hostile_comparison() -> tuple[str, Comparison, RunArtifact, RunArtifact, ReportContext]:
    topics = ["billing", "sync", "security", "install", "backup", "@team #7"]
    b_rows: list[Row] = []
    c_rows: list[Row] = []
    for i in range(240):
        topic = topics[i % len(topics)]
        hostile = HOSTILE_TEXT[i % len(HOSTILE_TEXT)]
        case_id = f"case-{i:03d} {hostile}" if i % 11 == 0 else f"case-{i:03d}"
        tags = [f"topic:{topic}"]
        hit_b = 1.0 if (i * 7) % 10 < 8 else 0.0
        drop = topic in ("billing", "@team #7") and i % 4 != 3
        hit_c = 0.0 if drop else hit_b
        f1_b = round(((i * 37) % 100) / 100, 2)
        f1_c = round(max(0.0, f1_b - 0.4), 2) if topic == "sync" and (i // 6) % 3 == 0 else f1_b
        fields = {
            "question": f"Question {i}: {hostile}?",
            "expected_answer": f"Expected {i} {hostile}",
            "expected_source_ids": [f"doc-{i % 9}"],
            "metadata": {"note": hostile},
        }
        chunks = [
            Chunk(id=f"doc-{(i + k) % 9}#{k}", metadata={"document_id": f"doc-{(i + k) % 9}"})
            for k in range(3)
        ]
        for rows, hit, f1, who in ((b_rows, hit_b, f1_b, "baseline"), (c_rows, hit_c, f1_c, "candidate")):
            r = row(case_id, {"retrieval.hit_rate_at_k": hit, "answer.token_f1": f1}, tags=tags)
            answer = Answer(text=f"{who} answer {i}: {hostile}")
            rows.append(r.model_copy(update={**fields, "answer": answer, "retrieved": chunks}))
    c_rows.append(row("case-new @x", {"retrieval.hit_rate_at_k": 1.0}))
    base = artifact(meta("20261128T120000Z-base", commit="b" * 40, sha="a" * 64), b_rows)
    cand = artifact(meta("20261201T090000Z-cand", commit="c" * 40, sha="d" * 64), c_rows)
    config = GateConfig(family_wise=True, metrics={"answer.token_f1": GateMetricConfig(margin=0.05)})
    comparison = compare_runs(base, cand, config)
    context = ReportContext(
        marker="<!-- ragproof:gate -->",
        run_url="https://github.com/acme/rag/actions/runs/42",
        artifact_url="https://github.com/acme/rag/actions/runs/42#artifacts",
        baseline_url="https://github.com/acme/rag/actions/runs/41",
        artifact_name="ragproof-run",
    )
    return (
        render_markdown(comparison, context=context, baseline=base, candidate=cand),
        comparison,
        base,
        cand,
        context,
    )


def _dropped_case(comparison: Comparison, base: RunArtifact, cand: RunArtifact) -> tuple[str, str]:
    """(question, candidate answer) of a case that dropped on a blocking gate (else on the
    reviewed gate reaching lowest), from the rows."""
    g = min(
        (
            g
            for g in comparison.gates
            if g.gating
            and g.decision in ("block", "review")
            and g.metric != "adapter.failure_rate"
            and g.lo is not None
        ),
        key=lambda g: (g.decision != "block", g.lo),
    )
    base_by_id = {r.case_id: r for r in base.rows}
    sign = 1.0 if g.higher_is_better else -1.0
    worst: tuple[float, str, str, str] | None = None
    for c in cand.rows:
        b = base_by_id.get(c.case_id)
        in_slice = g.slice == "all" or g.slice == f"kind={c.kind}" or g.slice.removeprefix("tags=") in c.tags
        if b is None or not in_slice or g.metric not in b.metrics or g.metric not in c.metrics:
            continue
        d = sign * ((c.metrics[g.metric].value or 0.0) - (b.metrics[g.metric].value or 0.0))
        if d < 0 and (worst is None or (d, c.case_id) < worst[:2]):
            assert c.question and c.answer
            worst = (d, c.case_id, c.question, c.answer.text)
    assert worst is not None, g
    return worst[2], worst[3]


def _plain(text: str) -> str:
    """What a reader sees of a user string: format characters gone, whitespace runs as one space."""
    kept = "".join(ch for ch in text if unicodedata.category(ch) != "Cf")
    return " ".join(kept.split())


def _check(
    markdown: str,
    comparison: Comparison,
    base: RunArtifact,
    cand: RunArtifact,
    workdir: Path,
    allowed_links: set[str],
) -> dict[str, Any]:
    html = cmark(markdown)
    m = measure(page(html, WIDTH), WIDTH, workdir)
    # no table wider than the comment (tables scroll inside a box as wide as the text column)
    for table in m["tables"]:
        assert table["clientWidth"] <= m["content"] + 0.5, table
        assert table["scrollWidth"] <= table["clientWidth"], table
    assert m["comment"]["scrollWidth"] <= m["comment"]["width"]
    # one screen outside <details>
    assert m["outside"] <= FIRST_SCREEN, m["outside"]
    visible = m["visibleText"].replace(ZWSP, "")
    # the headline's counts are the --json document's
    counts = HEADLINE.search(" ".join(visible.split()))
    assert counts, visible[:500]
    total, block, review = (int(x) for x in counts.groups()[:3])
    underpowered = int(counts.group(4) or 0)
    passed, skipped = int(counts.group(5)), int(counts.group(6))
    not_gating = int(counts.group(7) or 0)
    gating = [g for g in comparison.gates if g.gating]
    assert total == len(comparison.gates) == block + review + underpowered + passed + skipped + not_gating
    assert underpowered == sum(g.decision == "review" and not g.counts for g in gating)
    assert (block, review + underpowered, passed, skipped, not_gating) == (
        sum(g.decision == "block" for g in gating),
        sum(g.decision == "review" for g in gating),
        sum(g.decision == "pass" for g in gating),
        sum(g.decision == "skipped" for g in gating),
        len(comparison.gates) - len(gating),
    )
    # every blocking (metric, slice) is in a row of the table outside <details>
    groups: list[tuple[str, str]] = []  # (the metric line of its group, the row's text)
    for text in m["outsideRows"][1:]:
        text = text.replace(ZWSP, "")
        head = text if not text.lstrip().startswith("↳") else groups[-1][0]
        groups.append((head.split("\n")[0], text))
    for g in gating:
        if g.decision == "block":
            assert any(g.metric in head and _plain(g.slice) in _plain(text) for head, text in groups), (
                g.metric,
                g.slice,
            )
    # a dropped case of a blocking gate: its question and candidate answer are in the comment
    question, answer = _dropped_case(comparison, base, cand)
    text = _plain("".join(parts(html).text).replace(ZWSP, ""))
    assert _plain(question)[:150] in text and _plain(answer)[:150] in text
    # user strings make no link, mention or reference
    p = parts(html)
    assert set(p.hrefs) <= allowed_links, set(p.hrefs) - allowed_links
    all_text = "".join(p.text)
    assert not MENTION.search(all_text) and not REFERENCE.search(all_text)
    assert not [ch for ch in all_text if unicodedata.category(ch) == "Cf" and ch != ZWSP]
    assert not set(p.tags) - {
        "h2",
        "p",
        "strong",
        "em",
        "sub",
        "br",
        "wbr",
        "table",
        "thead",
        "tbody",
        "tr",
        "th",
        "td",
        "code",
        "details",
        "summary",
        "ul",
        "li",
        "blockquote",
        "a",
    }
    return m


def test_demo_comment_fits_one_screen_as_github_renders_it(
    demo: tuple[str, Comparison, RunArtifact, RunArtifact], tmp_path: Path, update_golden: bool
) -> None:
    markdown, comparison, base, cand = demo
    # the billing losses are beyond the margin for the slice, neither a block nor a review the
    # family confirms: a pass that names them on the first screen
    assert (comparison.overall, comparison.verdict.cause) == ("pass", "worse_unconfirmed")
    assert not [g for g in comparison.gates if g.gating and g.decision == "block"]
    m = _check(markdown, comparison, base, cand, tmp_path, set())
    # the why names the reviewed gate whose interval lies lowest (the surest drop)
    assert "answer.exact_match on tags=topic:billing (Δ −0.450" in m["visibleText"]
    if update_golden:
        screenshot(page(cmark(markdown), WIDTH), WIDTH, int(m["closedHeight"]) + 36, SCREENSHOT)


def test_a_differently_shaped_comparison_with_hostile_strings(tmp_path: Path) -> None:
    markdown, comparison, base, cand, context = _hostile_comparison()
    assert comparison.settings.family_wise and comparison.dataset.added == ["case-new @x"]
    blocks = {(g.metric, g.slice) for g in comparison.gates if g.gating and g.decision == "block"}
    assert ("retrieval.hit_rate_at_k", "tags=topic:@team #7") in blocks
    links = {context.run_url, context.artifact_url, context.baseline_url}
    _check(markdown, comparison, base, cand, tmp_path, {u for u in links if u})


def test_the_readme_screenshot_exists_and_is_a_png() -> None:
    data = SCREENSHOT.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width = int.from_bytes(data[16:20], "big")
    assert width == WIDTH
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert "](docs/demo-comment.png)" in readme
