"""The command adapter with a real long-lived subprocess: ordering, crashes, secrets, logs."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from gate.adapters import STDERR_LOG_NAME, build_adapter
from gate.adapters.base import AdapterError
from gate.adapters.command import MAX_CONSECUTIVE_EXITS, CommandAdapter
from gate.core.environment import Environment
from gate.core.errors import UsageError
from gate.model.config import parse_config
from gate.model.dataset import Case
from gate.model.records import CaseOutput

SCRIPT = Path(__file__).parents[1] / "pipelines" / "jsonl_pipeline.py"

SECRETS = {
    "GITHUB_TOKEN": "ghs_secret",
    "GH_TOKEN": "gh_secret",
    "ACTIONS_RUNTIME_TOKEN": "runtime",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "oidc",
    "INPUT_GITHUB-TOKEN": "ghs_input",
    "RAGPROOF_JUDGE_MODEL": "gpt-judge",
    "JUDGE_KEY": "sk-judge",
}


def _adapter(tmp_path: Path, variables: dict[str, str] | None = None, **settings: Any) -> CommandAdapter:
    data = {
        "dataset": "cases.jsonl",
        "adapter": {"type": "command", "command": [sys.executable, str(SCRIPT)], "retries": 1, **settings},
        "judge": {"api_key_env": "JUDGE_KEY"},
    }
    config = parse_config(data, tmp_path / "ragproof.yaml")
    base = {"PATH": "/usr/bin:/bin", "MARKER_DIR": str(tmp_path)}
    env = Environment(variables={**base, **(variables or {})}, cwd=tmp_path)
    adapter = build_adapter(config, env, tmp_path / "logs")
    assert isinstance(adapter, CommandAdapter)
    return adapter


def _run_all(
    adapter: CommandAdapter, questions: list[str], *, one_by_one: bool = False
) -> list[CaseOutput | BaseException]:
    async def go() -> list[Any]:
        await adapter.start()
        try:
            cases = [Case(id=str(i), question=q) for i, q in enumerate(questions)]
            if one_by_one:
                return [
                    (await asyncio.gather(adapter.run_case(c, 2), return_exceptions=True))[0] for c in cases
                ]
            return await asyncio.gather(*(adapter.run_case(c, 2) for c in cases), return_exceptions=True)
        finally:
            await adapter.close()

    return asyncio.run(go())


def _text(out: CaseOutput | BaseException) -> str:
    assert isinstance(out, CaseOutput), out
    assert out.answer is not None
    return out.answer.text


def test_replies_out_of_order_are_matched_by_id(tmp_path: Path) -> None:
    adapter = _adapter(tmp_path)
    questions = ["slow: first sent, last answered", "ok: two", "ok: three", "noise: four"]
    outs = _run_all(adapter, questions)
    assert [_text(o) for o in outs] == [f"answer: {q}" for q in questions]
    assert all(
        isinstance(o, CaseOutput) and [c.id for c in o.retrieved or []] == ["doc-1", "doc-2"] for o in outs
    )
    assert adapter.starts == 1  # one long-lived process for every case
    log = (tmp_path / "logs" / STDERR_LOG_NAME).read_text()
    assert "handling 1 retrieve" in log and "ignored a stdout line that is not JSON" in log


def test_crash_mid_run_restarts_and_retries(tmp_path: Path) -> None:
    adapter = _adapter(tmp_path)
    outs = _run_all(adapter, ["ok: before", "crashonce: boom"])
    assert _text(outs[1]) == "answer: crashonce: boom"
    assert adapter.starts == 2
    assert "exit code 3" in (tmp_path / "logs" / STDERR_LOG_NAME).read_text()


def test_deterministic_crash_ends_in_an_adapter_error(tmp_path: Path) -> None:
    adapter = _adapter(tmp_path, methods=["answer"])
    (out,) = _run_all(adapter, ["crash: always"])
    assert isinstance(out, AdapterError)
    assert str(out) == "answer: command closed its stdout; exit code 3 (after 1 retries)"


def test_a_process_that_keeps_dying_is_not_restarted_forever(tmp_path: Path) -> None:
    adapter = _adapter(tmp_path, methods=["answer"], retries=0)
    outs = _run_all(adapter, [f"crash: {i}" for i in range(MAX_CONSECUTIVE_EXITS + 3)], one_by_one=True)
    assert all(isinstance(o, AdapterError) for o in outs)
    assert adapter.starts == MAX_CONSECUTIVE_EXITS
    assert any("not restarting it" in str(o) for o in outs)


def test_error_reply_is_an_adapter_error(tmp_path: Path) -> None:
    (out,) = _run_all(_adapter(tmp_path), ["error: no index"])
    assert isinstance(out, AdapterError) and "index unavailable" in str(out)


def test_line_over_the_size_cap_is_an_adapter_error(tmp_path: Path) -> None:
    adapter = _adapter(tmp_path, methods=["answer"], max_response_bytes=100_000, retries=0)
    outs = _run_all(adapter, ["big: reply"])
    assert isinstance(outs[0], AdapterError) and "longer than max_response_bytes=100000" in str(outs[0])


def test_the_process_cannot_read_the_tokens(tmp_path: Path) -> None:
    adapter = _adapter(tmp_path, {**SECRETS, "SAFE_SETTING": "visible"}, methods=["answer"])
    (out,) = _run_all(adapter, ["env: dump"])
    seen = json.loads(_text(out))
    for name in SECRETS:
        assert name not in seen
    assert not any(value in json.dumps(seen) for value in SECRETS.values())
    assert seen["SAFE_SETTING"] == "visible"


def test_env_passthrough_lets_a_named_variable_through(tmp_path: Path) -> None:
    adapter = _adapter(tmp_path, SECRETS, methods=["answer"], env_passthrough=["RAGPROOF_JUDGE_MODEL"])
    (out,) = _run_all(adapter, ["env: dump"])
    seen = json.loads(_text(out))
    assert seen["RAGPROOF_JUDGE_MODEL"] == "gpt-judge"
    assert "GITHUB_TOKEN" not in seen and "JUDGE_KEY" not in seen


def test_missing_program_is_a_usage_error(tmp_path: Path) -> None:
    adapter = _adapter(tmp_path, command=["/nonexistent/pipeline-binary"])
    with pytest.raises(UsageError, match="adapter.command: cannot start '/nonexistent/pipeline-binary'"):
        _run_all(adapter, ["ok: x"])


def test_process_that_cannot_be_restarted_mid_run_is_a_usage_error_not_a_group(tmp_path: Path) -> None:
    program = tmp_path / "pipeline-bin"
    program.write_text(f"#!{sys.executable}\n" + SCRIPT.read_text())
    program.chmod(0o755)
    adapter = _adapter(tmp_path, command=[str(program)], retries=1)

    async def go() -> CaseOutput | BaseException:
        await adapter.start()
        program.unlink()  # the running process crashes next; its program is gone for the restart
        try:
            (result,) = await asyncio.gather(
                adapter.run_case(Case(id="1", question="crash: x"), 2), return_exceptions=True
            )
        finally:
            await adapter.close()
        return result

    result = asyncio.run(go())
    assert isinstance(result, UsageError), result
    assert f"adapter.command: cannot start '{program}'" in str(result)


def test_a_process_is_stopped_once_however_many_cases_ask(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each case in flight that times out asks to stop the process. A second Process.kill polls
    # the process and, when it has died meanwhile, reaps it before asyncio's child watcher does:
    # asyncio then logs "Unknown child process" on the run's stderr and the exit code becomes 255.
    signals: list[int] = []
    real_kill = asyncio.subprocess.Process.kill

    def kill(self: asyncio.subprocess.Process) -> None:
        signals.append(self.pid)
        real_kill(self)

    monkeypatch.setattr(asyncio.subprocess.Process, "kill", kill)
    adapter = _adapter(tmp_path)

    async def go() -> None:
        await adapter.start()
        try:
            for _ in range(3):  # three timed-out cases of one process
                adapter.kill()
        finally:
            await adapter.close()

    asyncio.run(go())
    assert len(signals) == 1
    log = (tmp_path / "logs" / STDERR_LOG_NAME).read_text()
    assert "was stopped (another request timed out); exit code -9" in log
