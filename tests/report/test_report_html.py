"""gate.report.html: self-contained pages with a server-rendered forest plot and distributions."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Any

from gate_runs import HOSTILE, artifact, fixed_runs, meta, row
from metric_helpers import defined

from gate.decision.compare import compare_runs
from gate.model.config import GateConfig
from gate.report.html import metric_panels, page_policy, render_compare_html, render_run_html


class _Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def _parse(text: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Collect()
    parser.feed(text)
    return parser.tags


def assert_self_contained(text: str, *, script: bool) -> None:
    """No remote resource, no event handler; one inline script at most, allowed by the CSP's hash."""
    tags = _parse(text)
    names = [t for t, _ in tags]
    assert "link" not in names and "img" not in names and "iframe" not in names
    assert names.count("script") == (1 if script else 0)
    for _, attrs in tags:
        for key, value in attrs.items():
            assert not key.startswith("on"), key
            assert key != "src", (key, value)
            if key == "href":
                assert value and value.startswith("#"), value  # in-page anchors only
    assert "http://" not in text and "https://" not in text
    assert "@import" not in text and "url(" not in text
    policy = [
        a["content"] for t, a in tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"
    ]
    assert policy == [page_policy(_script(text) if script else None)]
    assert (policy[0] or "").startswith("default-src 'none'; style-src 'sha256-")


def _script(text: str) -> str:
    return text.split("<script>", 1)[1].split("</script>", 1)[0]


def test_compare_html_opens_with_the_decision_and_one_panel_per_metric() -> None:
    base, cand = fixed_runs()
    comparison = compare_runs(base, cand, GateConfig())
    text = render_compare_html(comparison, base, cand)
    assert text.startswith("<!DOCTYPE html>")
    assert_self_contained(text, script=True)
    # decision first: the headline, the why, then the attention table, before the panels
    assert text.index('id="decision"') < text.index("<strong>Why:</strong>") < text.index('id="attention"')
    assert text.index('id="attention"') < text.index('id="metrics"') < text.index('id="explorer"')
    # the counts as the comment states them; the underpowered reviews fold into the panels
    assert "<strong>0 review</strong> · 12 inform only · 3 pass" in text
    assert "12 gates that inform only, in the metric panels below." in text
    panels: list[dict[str, Any]] = metric_panels(comparison)
    # the panels count as the header does (before: each panel counted its inform-only reviews
    # as reviews, 12 in all, beside the header's 2)
    totals = {k: sum(p["counts"][k] for p in panels) for k in ("block", "review", "inform", "pass")}
    assert totals == {"block": 3, "review": 0, "inform": 12, "pass": 3}
    assert "0 review · 6 inform only · 0 pass</span>" in text  # adapter.failure_rate's panel
    # attention first: the blocking metric, then review, then the rest
    assert [p["metric"] for p in panels] == [
        "answer.token_f1",
        "adapter.failure_rate",
        "robustness.overrefusal",
        "retrieval.hit_rate_at_k",
    ]
    decided = [g for g in comparison.gates if g.gating and g.decision != "skipped"]
    assert sum(len(p["plot"]["rows"]) for p in panels if p["plot"]) == len(decided)
    assert text.count("<circle ") == len(decided)
    for p in panels:
        plot = p["plot"]
        if plot is None:
            continue
        for r in plot["rows"]:
            assert 0 <= r["x_lo"] <= r["x_delta"] <= r["x_hi"] <= plot["width"]
            assert r["x_margin"] < plot["x_zero"]
        # within a panel: attention rows first
        ranks = [{"block": 0, "review": 1, "pass": 2}[r["decision"]] for r in plot["rows"]]
        assert ranks == sorted(ranks)
    # skipped gates are folded away and named for what they are; nothing says "(not gating)" of a block
    assert "skipped (too few pairs)</summary>" in text and "block (not gating)" not in text
    # the case explorer lists every paired case once
    assert text.count('<tr data-slices="') == comparison.dataset.common == 240
    # distributions of every numeric metric for both runs
    for name in ("retrieval.hit_rate_at_k", "answer.token_f1", "robustness.overrefusal"):
        assert f"<strong>{name}</strong>" in text
    assert text.count("baseline: n ") == 3 and text.count("candidate: n ") == 3


def test_panel_geometry_is_exact() -> None:
    base, cand = fixed_runs()
    comparison = compare_runs(base, cand, GateConfig())
    panel: dict[str, Any] = next(p for p in metric_panels(comparison) if p["metric"] == "answer.token_f1")
    shown = [g for g in comparison.gates if g.metric == "answer.token_f1" and g.gating and g.lo is not None]
    scale = max(max(abs(defined(g.lo)), abs(defined(g.hi)), g.margin) for g in shown) * 1.15
    plot = panel["plot"]
    assert plot["x_zero"] == round(scale / (2 * scale) * 360, 2)
    first = next(g for g in shown if g.slice == plot["rows"][0]["label"])
    assert plot["rows"][0]["x_lo"] == round((defined(first.lo) + scale) / (2 * scale) * 360, 2)
    assert plot["rows"][0]["x_margin"] == round((-first.margin + scale) / (2 * scale) * 360, 2)


def test_hostile_strings_are_escaped() -> None:
    b_rows = [row(HOSTILE, {"retrieval.hit_rate_at_k": 1.0}, tags=[HOSTILE])] + [
        row(f"q{i}", {"retrieval.hit_rate_at_k": 1.0}) for i in range(20)
    ]
    c_rows = [row(HOSTILE, {"retrieval.hit_rate_at_k": 0.0}, tags=[HOSTILE])] + [
        row(f"q{i}", {"retrieval.hit_rate_at_k": 1.0}) for i in range(20)
    ]
    b, c = artifact(meta("b"), b_rows), artifact(meta("c"), c_rows)
    text = render_compare_html(compare_runs(b, c, GateConfig(min_pairs=1)), b, c)
    assert "<img" not in text and "&lt;img src=x&gt;" in text
    assert_self_contained(text, script=True)


def test_run_html() -> None:
    base, _ = fixed_runs()
    text = render_run_html(base)
    assert_self_contained(text, script=False)
    assert "ragproof run 20261128T120000Z-base" in text
    assert re.search(r"<h2>tags=topic:billing</h2>", text)
    assert text.count("<svg ") == 3  # one histogram per numeric metric
