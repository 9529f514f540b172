"""report.html in headless Chromium at 1280 px: the first screen, the case explorer's filters,
no network request, the page's own CSP enforced.

The demo's report (a real ``ragproof demo``) is loaded with one measuring script appended and
allowed by its sha256 in the page's policy; the script records where the decision and the
attention table end, drives the explorer's two filters and counts the visible rows, lists the
page's resource requests, and checks that an inline script the policy does not name never runs.
"""

from __future__ import annotations

import html
import re
import subprocess
import sys
from pathlib import Path

import pytest
from render_helpers import allow_script, run_page

from gate.decision.comparison import Comparison
from gate.report.cases import PairedCases, explorer_cases
from gate.report.markdown import attention as attention_rows
from gate.run.artifact_io import read_artifact

pytestmark = pytest.mark.browser

WIDTH, SCREEN = 1280, 800

PROBE = """
(function () {
  const out = {};
  const rect = (sel) => { const e = document.querySelector(sel); return e ? e.getBoundingClientRect() : null; };
  out.decisionBottom = rect('#decision').bottom;
  out.decisionText = document.querySelector('#decision').textContent;
  out.countsText = document.querySelector('#counts').textContent;
  out.attentionBottom = rect('#attention') ? rect('#attention').bottom : null;
  out.firstScreen = document.body.innerText.slice(0, 600);
  out.attentionRows = Array.from(document.querySelectorAll('#attention tbody tr')).map(r => r.innerText);
  out.pageWidth = document.documentElement.scrollWidth;
  const rows = Array.from(document.querySelectorAll('#cases > tbody > tr'));
  const visible = () => rows.filter(r => !r.hidden && r.getBoundingClientRect().height > 0);
  const slice = document.getElementById('f-slice'), change = document.getElementById('f-change');
  const pick = (sel, value) => { sel.value = value; sel.dispatchEvent(new Event('change')); };
  out.total = rows.length;
  out.initial = visible().length;
  out.bySlice = {};
  for (const o of slice.options) {
    pick(slice, o.value);
    out.bySlice[o.textContent] = visible().map(r => r.querySelector('strong').textContent);
  }
  pick(slice, '');
  out.byChange = {};
  for (const v of ['worse', 'better', 'same']) {
    pick(change, v);
    out.byChange[v] = visible().map(r => r.querySelector('strong').textContent);
  }
  const billing = Array.from(slice.options).find(o => o.textContent.startsWith('tags=topic:billing '));
  pick(slice, billing.value); pick(change, 'worse');
  out.billingWorse = visible().map(r => r.querySelector('strong').textContent);
  out.countText = document.getElementById('f-count').textContent;
  out.resources = performance.getEntriesByType('resource').map(e => e.name);
  out.injected = window.__injected === true;
  const pre = document.createElement('pre'); pre.id = 'measurements';
  pre.textContent = JSON.stringify(out); document.body.appendChild(pre);
})();
"""


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo") / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "gate", "demo", "--out", str(out)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    return out


def test_report_opens_with_the_decision_and_its_explorer_filters(demo: Path, tmp_path: Path) -> None:
    page = (demo / "report.html").read_text(encoding="utf-8")
    comparison = Comparison.model_validate_json((demo / "decision.json").read_text(encoding="utf-8"))
    baseline, candidate = read_artifact(demo / "baseline"), read_artifact(demo / "candidate")
    # An inline script the policy does not allow (as a hostile answer might try): it must not run.
    hostile = page.replace("</body>", "<script>window.__injected = true;</script></body>")
    m = run_page(allow_script(hostile, PROBE), WIDTH, SCREEN, tmp_path)

    # the first screen: the decision, then every gate that needs attention
    # the billing drop is beyond the margin for its slice, neither a block nor a review the
    # family confirms: a pass whose why names the slice as worse, with its interval
    assert comparison.verdict.cause == "worse_unconfirmed"
    assert "answer.exact_match on tags=topic:billing" in m["firstScreen"]
    assert m["attentionBottom"] is None or m["decisionBottom"] < m["attentionBottom"] <= SCREEN
    # the first screen's attention rows (blocks, then the reviews that decide, up to its size)
    first, _ = attention_rows(comparison, PairedCases(comparison, baseline, candidate))
    attention = [g for r in first for g in r.gates]
    text = "\n".join(m["attentionRows"])
    for g in attention:
        assert any(g.metric in row and g.slice.split("=", 1)[-1] in row for row in m["attentionRows"]), g
    blocks = [g for g in attention if g.decision == "block"]
    assert text.count("real drop") == len(blocks) == 0
    gating = [g for g in comparison.gates if g.gating]
    counts = [sum(g.decision == d for g in gating) for d in ("block", "review", "pass", "skipped")]
    informing = sum(g.decision == "review" and not g.counts for g in gating)
    assert informing == 69  # the demo's reviews that do not decide: none is confirmed over the family
    assert m["countsText"].startswith(
        f"{len(comparison.gates)} gates: {counts[0]} block · {counts[1] - informing} review · "
        f"{informing} inform only · {counts[2]} pass · "
        f"{counts[3]} skipped · {len(comparison.gates) - len(gating)} not gating"
    )
    assert m["pageWidth"] <= WIDTH

    # the explorer: every paired case, filters by slice and by change (computed here independently)
    paired = PairedCases(comparison, baseline, candidate)
    cases = explorer_cases(comparison, paired)
    assert m["total"] == m["initial"] == len(cases) == comparison.dataset.common
    for label, ids in m["bySlice"].items():
        if label == "all slices":
            assert len(ids) == len(cases)
            continue
        key = label.rsplit(" (", 1)[0]
        expected = {
            r.case_id
            for r in candidate.rows
            if key == "all" or key == f"kind={r.kind}" or key.removeprefix("tags=") in r.tags
        }
        assert set(ids) == expected and label.endswith(f"({len(expected)})"), label
    gated = {g.metric for g in comparison.gates if g.gating}
    base_by_id = {r.case_id: r for r in baseline.rows}
    expected_change: dict[str, str] = {}
    for r in candidate.rows:
        b = base_by_id[r.case_id]
        ds = []
        for g in comparison.gates:
            if g.slice != "all" or g.metric not in gated or g.metric == "adapter.failure_rate":
                continue
            bm, cm = b.metrics.get(g.metric), r.metrics.get(g.metric)
            if bm and cm and bm.status == cm.status == "scored":
                d = (cm.value or 0.0) - (bm.value or 0.0)
                ds.append(d if g.higher_is_better else -d)
        fail = (r.status != "ok") - (b.status != "ok")
        ds.append(-fail)
        expected_change[r.case_id] = "worse" if min(ds) < 0 else "better" if max(ds) > 0 else "same"
    for change, ids in m["byChange"].items():
        assert set(ids) == {k for k, v in expected_change.items() if v == change}, change
    assert sum(len(v) for v in m["byChange"].values()) == len(cases)
    billing_worse = {
        k
        for k, v in expected_change.items()
        if v == "worse" and "topic:billing" in next(r.tags for r in candidate.rows if r.case_id == k)
    }
    assert set(m["billingWorse"]) == billing_worse and billing_worse
    assert m["countText"] == f"{len(billing_worse)} of {len(cases)} cases"

    # nothing is fetched, and the CSP keeps any other script from running
    assert m["resources"] == []
    assert m["injected"] is False
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', page)
    assert policy and html.unescape(policy.group(1)).startswith("default-src 'none'; style-src 'sha256-")
