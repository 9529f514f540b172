"""Calibration: bands, agreement statistics, fixtures, and ``ragproof calibrate`` against a real judge server."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest
from servers.judge_server import JudgeServer, Responder, Step, reply, user_prompt

from gate.core.errors import DataError
from gate.judge.templates import PROMPTS_DIR
from gate.model.records import MetricResult
from gate.run.calibration import (
    MIN_FIXTURES,
    PROMPT_METRICS,
    HumanJudge,
    PromptAgreement,
    agreement,
    band,
    load_fixtures,
    passes,
    score_fixture,
)

FIXTURES = load_fixtures()


def test_bands() -> None:
    assert [band(s) for s in (0.0, 0.2, 0.25, 0.5, 0.75, 0.76, 1.0)] == [0.0, 0.0, 0.5, 0.5, 0.5, 1.0, 1.0]


def test_agreement_statistics_exact() -> None:
    human = [1.0, 1.0, 0.0, 0.0, 0.5, 0.0]
    judge = [1.0, 0.5, 1.0, 0.0, 0.5, None]
    r = agreement("claims", human, judge, ["a", "b", "c", "d", "e", "f"])
    assert (r.items, r.exact, r.within_band) == (6, 3 / 6, 4 / 6)
    assert (r.failure_items, r.misses, r.unscored) == (3, 1, 1)
    assert r.miss_rate == 1 / 3
    assert r.disagreements == ["b", "c", "f"]
    # kappa over the 5 labelled pairs: p_o = 3/5; p_e = (2/5*2/5) + (1/5*2/5) + (2/5*1/5) = 8/25
    assert r.kappa == pytest.approx((3 / 5 - 8 / 25) / (1 - 8 / 25), abs=1e-12)


def _value(result: MetricResult) -> float:
    assert result.value is not None, result
    return result.value


def _ten(exact: int, one_band_off: int) -> PromptAgreement:
    # ten items of the top band: `exact` agree, `one_band_off` are judged 0.5, the rest 0
    judged: list[float | None] = [*[1.0] * exact, *[0.5] * one_band_off, *[0.0] * (10 - exact - one_band_off)]
    return agreement("claims", [1.0] * 10, judged, [f"f{i}" for i in range(10)])


def test_default_thresholds_are_70_percent_exact_and_90_percent_within_band() -> None:
    from gate.model.config import CalibrationConfig

    defaults = CalibrationConfig()
    assert (defaults.min_exact, defaults.min_within_band) == (0.70, 0.90)
    at_both = _ten(exact=7, one_band_off=2)
    assert (at_both.exact, at_both.within_band) == (0.7, 0.9)
    assert passes([at_both], defaults.min_exact, defaults.min_within_band) is True
    below_exact = _ten(exact=6, one_band_off=3)  # within band still 90%
    assert passes([below_exact], defaults.min_exact, defaults.min_within_band) is False
    below_within = _ten(exact=7, one_band_off=1)  # exact still 70%, within band 80%
    assert passes([below_within], defaults.min_exact, defaults.min_within_band) is False
    # every prompt must pass: one failing prompt fails the run
    assert passes([at_both, below_within], defaults.min_exact, defaults.min_within_band) is False


def test_bundled_fixtures_cover_every_prompt_with_every_band() -> None:
    assert set(FIXTURES) == set(PROMPT_METRICS)
    for prompt, items in FIXTURES.items():
        assert len(items) >= MIN_FIXTURES
        bands = {band(_value(score_fixture(prompt, f, HumanJudge(prompt, f.human)))) for f in items}
        assert 0.0 in bands and 1.0 in bands, prompt  # the failure class and the good class
        assert len({f.question for f in items}) == len(items), prompt


def test_too_few_fixtures_and_bad_lines_are_data_errors(tmp_path: Path) -> None:
    (tmp_path / "refusal.jsonl").write_text(
        '{"id": "r1", "question": "q", "answer": "a", "human": {"declined": true}}\n'
    )
    with pytest.raises(DataError, match=r"refusal.jsonl: 1 fixtures; calibration needs at least 10"):
        load_fixtures(tmp_path)
    (tmp_path / "refusal.jsonl").write_text('{"id": "r1", "question": "q", "human": {"declined": "often"}}\n')
    with pytest.raises(DataError, match=r"refusal.jsonl:1: declined: Input should be a valid boolean"):
        load_fixtures(tmp_path)
    (tmp_path / "refusal.jsonl").unlink()
    (tmp_path / "tone.jsonl").write_text("")
    with pytest.raises(DataError, match="unknown prompt 'tone'"):
        load_fixtures(tmp_path)


# --- the command against an oracle judge ------------------------------------------------

TASK_LINES = {
    (PROMPTS_DIR / f"{prompt}.j2").read_text(encoding="utf-8").splitlines()[0]: prompt
    for prompt in PROMPT_METRICS
}


def _question_of(prompt: str) -> str:
    return prompt.split("<<<BEGIN QUESTION>>>\n", 1)[1].split("\n<<<END QUESTION>>>", 1)[0]


def _flip(annotation: dict[str, Any]) -> dict[str, Any]:
    """The opposite verdict: booleans inverted, outer bands swapped."""
    swap = {"relevant": "irrelevant", "irrelevant": "relevant", "complete": "missing", "missing": "complete"}
    out = json.loads(json.dumps(annotation))
    if "verdict" in out:
        out["verdict"] = swap.get(out["verdict"], out["verdict"])
    if "declined" in out:
        out["declined"] = not out["declined"]
    for item in out.get("claims", []) + out.get("verdicts", []):
        for key, value in item.items():
            if isinstance(value, bool):
                item[key] = not value
    return cast("dict[str, Any]", out)


def oracle(agree: bool) -> Responder:
    by_key = {(prompt, f.question): f.human for prompt, items in FIXTURES.items() for f in items}

    def respond(body: dict[str, Any]) -> Step:
        prompt = user_prompt(body)
        task = TASK_LINES[prompt.splitlines()[0]]
        human = by_key[(task, _question_of(prompt))]
        return reply(human if agree else _flip(human))

    return respond


def _ragproof(cwd: Path, *args: str, **variables: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGPROOF_")}
    env.update(variables)
    return subprocess.run(
        [sys.executable, "-m", "gate", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def _calibrate(server: JudgeServer, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    judge = {"RAGPROOF_JUDGE_MODEL": "oracle-judge", "RAGPROOF_JUDGE_BASE_URL": server.openai_url}
    return _ragproof(cwd, "calibrate", *args, **judge)


def _rows(stdout: str) -> dict[str, list[str]]:
    rows = {}
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells and cells[0] in PROMPT_METRICS:
            rows[cells[0]] = cells
    return rows


@pytest.mark.slow
def test_agreeing_judge_passes_with_the_table(tmp_path: Path) -> None:
    with JudgeServer(oracle(agree=True)) as server:
        proc = _calibrate(server, tmp_path)
        calls = server.count
    assert proc.returncode == 0, proc.stderr
    rows = _rows(proc.stdout)
    assert set(rows) == set(PROMPT_METRICS)
    for prompt, cells in rows.items():
        assert cells[1] == str(len(FIXTURES[prompt]))
        assert cells[2:4] == ["100%", "100%"] and cells[4] == "1.00"
        assert cells[6:8] == ["0", "0%"] and cells[-1] == "pass"
    assert "passed: thresholds exact >= 70%, within band >= 90% per prompt" in proc.stdout
    # one call per fixture (citation_support fixtures always cite a context chunk)
    assert calls == sum(len(items) for items in FIXTURES.values())


@pytest.mark.slow
def test_disagreeing_judge_fails_with_the_table(tmp_path: Path) -> None:
    with JudgeServer(oracle(agree=False)) as server:
        proc = _calibrate(server, tmp_path)
    assert proc.returncode == 1, proc.stderr
    rows = _rows(proc.stdout)
    assert set(rows) == set(PROMPT_METRICS)
    assert all(cells[-1] == "FAIL" for cells in rows.values())
    # failure-class fixtures flip to the top band: every one is missed ...
    assert all(cells[7] == "100%" for prompt, cells in rows.items() if prompt != "faithfulness")
    # ... except faithfulness, where a flipped mix of entailed/unentailed claims is still unfaithful
    assert rows["faithfulness"][2:4] == ["50%", "50%"] and rows["faithfulness"][6:8] == ["0", "0%"]
    assert rows["refusal"][2:5] == ["0%", "0%", "-0.98"]
    assert "FAILED: thresholds" in proc.stdout and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_thresholds_come_from_the_config(tmp_path: Path) -> None:
    (tmp_path / "ragproof.yaml").write_text(
        "dataset: cases.jsonl\nadapter: {type: replay, path: r.jsonl}\n"
        "calibration: {min_exact: 0.0, min_within_band: 0.0}\n"
    )
    with JudgeServer(oracle(agree=False)) as server:
        proc = _calibrate(server, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "passed: thresholds exact >= 0%, within band >= 0%" in proc.stdout


def test_without_a_judge_is_a_usage_error(tmp_path: Path) -> None:
    proc = _ragproof(tmp_path, "calibrate")
    assert proc.returncode == 64
    assert proc.stderr.strip() == (
        "ragproof: error: calibrate needs a judge: set judge.model in ragproof.yaml or RAGPROOF_JUDGE_MODEL"
    )


def test_kappa_is_nan_when_undefined() -> None:
    r = agreement("refusal", [1.0, 1.0], [1.0, 1.0], ["a", "b"])
    assert math.isnan(r.kappa) and r.exact == 1.0
