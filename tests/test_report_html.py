"""gate.report.html: self-contained pages with a server-rendered forest plot and distributions."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from gate_runs import HOSTILE, artifact, fixed_runs, meta, row

from gate.decision.compare import compare_runs
from gate.model.config import GateConfig
from gate.report.html import forest_plot, render_compare_html, render_run_html


class _Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def _parse(text: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Collect()
    parser.feed(text)
    return parser.tags


def assert_self_contained(text: str) -> None:
    tags = _parse(text)
    names = {t for t, _ in tags}
    assert "script" not in names and "link" not in names and "img" not in names and "iframe" not in names
    for _, attrs in tags:
        for key, value in attrs.items():
            assert not key.startswith("on"), key
            assert key not in {"src", "href"}, (key, value)
    assert "http://" not in text and "https://" not in text
    assert "@import" not in text and "url(" not in text


def test_compare_html_has_a_forest_plot_for_every_gate():
    base, cand = fixed_runs()
    comparison = compare_runs(base, cand, GateConfig())
    text = render_compare_html(comparison, base, cand)
    assert text.startswith("<!DOCTYPE html>")
    assert_self_contained(text)
    with_interval = [g for g in comparison.gates if g.lo is not None]
    plot = forest_plot(comparison.gates)
    assert len(plot["rows"]) == len(with_interval)
    # one interval line, one margin tick and one dot per gate, plus the zero line
    assert text.count("<circle ") == len(with_interval)
    assert 'stroke-dasharray="4 3"' in text
    for r in plot["rows"]:
        assert 0 <= r["x_lo"] <= r["x_delta"] <= r["x_hi"] <= plot["width"]
        assert r["x_margin"] < plot["x_zero"]
    # distributions of every numeric metric for both runs
    for name in ("retrieval.hit_rate_at_k", "answer.token_f1", "robustness.overrefusal"):
        assert f"<strong>{name}</strong>" in text
    assert text.count("baseline: n ") == 3 and text.count("candidate: n ") == 3


def test_forest_plot_geometry_is_exact():
    base, cand = fixed_runs()
    gate = next(g for g in compare_runs(base, cand, GateConfig()).gates if g.lo is not None)
    plot = forest_plot([gate])
    scale = max(abs(gate.lo), abs(gate.hi), gate.margin) * 1.15
    [r] = plot["rows"]
    assert plot["x_zero"] == round(scale / (2 * scale) * 420, 2)
    assert r["x_lo"] == round((gate.lo + scale) / (2 * scale) * 420, 2)
    assert r["x_margin"] == round((-gate.margin + scale) / (2 * scale) * 420, 2)


def test_hostile_strings_are_escaped():
    b_rows = [row(HOSTILE, {"retrieval.hit_rate_at_k": 1.0}, tags=[HOSTILE])] + [
        row(f"q{i}", {"retrieval.hit_rate_at_k": 1.0}) for i in range(20)
    ]
    c_rows = [row(HOSTILE, {"retrieval.hit_rate_at_k": 0.0}, tags=[HOSTILE])] + [
        row(f"q{i}", {"retrieval.hit_rate_at_k": 1.0}) for i in range(20)
    ]
    b, c = artifact(meta("b"), b_rows), artifact(meta("c"), c_rows)
    text = render_compare_html(compare_runs(b, c, GateConfig(min_pairs=1)), b, c)
    assert "<img" not in text and "&lt;img src=x&gt;" in text
    assert_self_contained(text)


def test_run_html():
    base, _ = fixed_runs()
    text = render_run_html(base)
    assert_self_contained(text)
    assert "ragproof run 20261128T120000Z-base" in text
    assert re.search(r"<h2>tags=topic:billing</h2>", text)
    assert text.count("<svg ") == 3  # one histogram per numeric metric
