"""Builders for judge tests: a JudgeConfig pointed at the scripted server and a session on a real store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gate.core.environment import Environment
from gate.judge.session import JudgeSession, build_judge
from gate.model.config import JudgeConfig

MODEL = "judge-test-model"


def judge_config(base_url: str, **overrides: Any) -> JudgeConfig:
    fields: dict[str, Any] = {"model": MODEL, "base_url": base_url, "timeout_s": 5.0, "retries": 1}
    fields.update(overrides)
    return JudgeConfig.model_validate(fields)


def make_session(base_url: str, store: Path, *, use_cache: bool = True, **overrides: Any) -> JudgeSession:
    env = Environment(variables={"OPENAI_API_KEY": "sk-test-judge"}, cwd=store.parent)
    session = build_judge(judge_config(base_url, **overrides), env, store, use_cache)
    assert session is not None
    return session
