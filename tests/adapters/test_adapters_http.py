"""The http adapter against a scripted pipeline server on 127.0.0.1: retries, limits, errors."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import pytest
from run_helpers import run_one_case
from servers.pipeline_server import PipelineServer

from gate.adapters import build_adapter, http_headers
from gate.adapters.base import AdapterError, AdapterTimeout
from gate.adapters.http import HttpAdapter, retry_after_seconds
from gate.core.environment import Environment
from gate.core.errors import UsageError
from gate.model.config import AdapterConfig, parse_config
from gate.model.dataset import Case
from gate.model.records import CaseOutput


@pytest.fixture(scope="module")
def server() -> Any:
    with PipelineServer(hang_s=2.0) as srv:
        yield srv


def _adapter(url: str, **settings: Any) -> HttpAdapter:
    fields: dict[str, Any] = {"type": "http", "url": url, "backoff_s": 0.01, "timeout_s": 5.0, **settings}
    return HttpAdapter(AdapterConfig(**fields), headers=fields.pop("headers", {}))


def _run(adapter: HttpAdapter, question: str, k: int = 3) -> CaseOutput:
    return run_one_case(adapter, question, k)


def test_ok_returns_validated_chunks_and_answer(server: PipelineServer) -> None:
    out = _run(_adapter(server.url), "ok: where is the office", k=4)
    assert out.supports_retrieve and out.supports_answer
    assert [c.id for c in out.retrieved or []] == ["doc-1", "doc-2", "doc-3", "doc-4"]
    assert out.answer is not None and out.answer.text == "answer: ok: where is the office"
    assert out.answer.citations == ["doc-1"]


def test_500_then_200_is_retried_once_per_call(server: PipelineServer) -> None:
    q = "flaky: first call fails"
    out = _run(_adapter(server.url, retries=2), q)
    assert out.answer is not None and out.answer.text == f"answer: {q}"
    assert server.count("/retrieve", q) == 2
    assert server.count("/answer", q) == 2


@pytest.mark.parametrize(
    ("question", "settings", "error", "calls"),
    [
        pytest.param("always500: never works", {"retries": 2}, r"HTTP 503 \(after 2 retries\)", 3, id="5xx"),
        pytest.param(
            "dropalways: never",
            {"retries": 1},
            r"POST /answer: connection lost \(\w+\) \(after 1 retries\)",
            2,
            id="dropped",
        ),
        pytest.param("malformed: body", {}, "not valid JSON", 1, id="malformed-json"),
        pytest.param("bad: input", {"retries": 3}, "HTTP 422: .*question rejected", 1, id="4xx"),
        pytest.param(
            "huge: body",
            {"max_response_bytes": 1_000_000},
            "exceeds max_response_bytes=1000000",
            1,
            id="50mb",
        ),
        pytest.param(
            "hugestream: body",
            {"max_response_bytes": 1_000_000},
            "exceeds max_response_bytes=1000000",
            1,
            id="50mb-unframed",
        ),
    ],
)
def test_failures_are_adapter_errors_after_the_retries_they_deserve(
    server: PipelineServer, question: str, settings: dict[str, Any], error: str, calls: int
) -> None:
    # Connection errors and 5xx are retried up to `retries` times; 4xx, bad JSON and
    # oversized bodies fail at once.
    with pytest.raises(AdapterError, match=error) as failure:
        _run(_adapter(server.url, methods=["answer"], **settings), question)
    assert not isinstance(failure.value, AdapterTimeout)
    assert server.count("/answer", question) == calls


def test_read_timeout_is_a_timeout_not_a_retry(server: PipelineServer) -> None:
    q = "hang: slow"
    with pytest.raises(AdapterTimeout, match="no response within 0.3 s"):
        _run(_adapter(server.url, timeout_s=0.3, retries=2, methods=["answer"]), q)
    assert server.count("/answer", q) == 1


def test_429_waits_for_retry_after(server: PipelineServer) -> None:
    q = "ratelimit: busy"
    out = _run(_adapter(server.url, retries=1, methods=["answer"]), q)
    assert out.answer is not None
    first, second = server.times("/answer", q)
    # backoff_s is 0.01: only Retry-After: 1 explains a one-second gap
    assert second - first >= 0.95


def test_dropped_connection_is_retried(server: PipelineServer) -> None:
    q = "drop: once"
    out = _run(_adapter(server.url, methods=["answer"]), q)
    assert out.answer is not None and out.answer.text == f"answer: {q}"
    assert server.count("/answer", q) == 2


def test_answer_only_pipeline_never_calls_retrieve(server: PipelineServer) -> None:
    q = "ok: answer only"
    out = _run(_adapter(server.url, methods=["answer"]), q)
    assert not out.supports_retrieve and out.retrieved is None
    assert server.count("/retrieve", q) == 0


def test_configured_paths(server: PipelineServer) -> None:
    q = "ok: versioned paths"
    out = _run(_adapter(server.url, retrieve_path="/v1/retrieve", answer_path="/v1/answer"), q)
    assert out.retrieved is not None and out.answer is not None
    assert server.count("/v1/retrieve", q) == 1 and server.count("/v1/answer", q) == 1


def test_204_is_read_as_empty_not_waited_on(server: PipelineServer) -> None:
    with pytest.raises(AdapterError, match="POST /answer: response is not valid JSON"):
        _run(_adapter(server.url, methods=["answer"], timeout_s=3.0), "nocontent: nothing")


def test_chunked_reply(server: PipelineServer) -> None:
    out = _run(_adapter(server.url, methods=["answer"]), "chunked: reply")
    assert out.answer is not None and out.answer.text == "answer: chunked: reply"


def test_connections_are_kept_alive_and_a_stale_one_is_replaced_without_a_retry() -> None:
    with PipelineServer() as srv:
        adapter = _adapter(srv.url, methods=["answer"], retries=0, concurrency=1)

        async def go() -> list[str]:
            await adapter.start()
            texts = []
            for q in ["ok: one", "ok: two", "stale: three", "ok: four", "ok: five"]:
                out = await adapter.run_case(Case(id="c", question=q), 1)
                assert out.answer is not None
                texts.append(out.answer.text)
            await adapter.close()
            return texts

        assert asyncio.run(go()) == [
            f"answer: {q}" for q in ["ok: one", "ok: two", "stale: three", "ok: four", "ok: five"]
        ]
        assert srv.connections() == 2  # one reused for three calls, one opened after the server dropped it
        assert srv.count("/answer", "ok: four") == 1


def test_refused_connection_is_retried_then_an_adapter_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(
        AdapterError, match=r"POST /answer: cannot connect \(ConnectionRefusedError\) \(after 2 retries\)"
    ):
        _run(_adapter(f"http://127.0.0.1:{port}", retries=2, methods=["answer"]), "ok: nobody home")


def _config(tmp_path: Path, adapter: dict[str, Any], judge: dict[str, Any] | None = None) -> Any:
    data: dict[str, Any] = {"dataset": "cases.jsonl", "adapter": {"type": "http", **adapter}}
    if judge:
        data["judge"] = judge
    return parse_config(data, tmp_path / "ragproof.yaml")


def test_header_values_cannot_carry_line_breaks(tmp_path: Path) -> None:
    config = _config(tmp_path, {"url": "http://127.0.0.1:1", "headers_from_env": {"X-Token": "TOKEN"}})
    env = Environment(variables={"TOKEN": "abc\r\nX-Injected: 1"}, cwd=tmp_path)
    with pytest.raises(
        UsageError, match="adapter.headers_from_env.X-Token: header values cannot contain line breaks"
    ):
        http_headers(config, env)


def test_headers_from_env_are_sent(server: PipelineServer, tmp_path: Path) -> None:
    config = _config(
        tmp_path,
        {
            "url": server.url,
            "headers": {"X-Static": "1"},
            "headers_from_env": {"Authorization": "PIPE_TOKEN"},
        },
    )
    env = Environment(variables={"PIPE_TOKEN": "Bearer abc"}, cwd=tmp_path)
    adapter = build_adapter(config, env, tmp_path)
    assert isinstance(adapter, HttpAdapter)
    q = "ok: with headers"
    _run(adapter, q)
    sent = [
        h for h, (_, question, _) in zip(server.headers_seen, server.requests, strict=True) if question == q
    ]
    assert sent and all(h["Authorization"] == "Bearer abc" and h["X-Static"] == "1" for h in sent)


def test_header_from_missing_variable_is_a_usage_error(tmp_path: Path) -> None:
    config = _config(tmp_path, {"url": "http://127.0.0.1:1", "headers_from_env": {"Authorization": "NOPE"}})
    with pytest.raises(
        UsageError, match="adapter.headers_from_env.Authorization: environment variable NOPE is not set"
    ):
        http_headers(config, Environment(variables={}, cwd=tmp_path))


@pytest.mark.parametrize(
    "variable", ["GITHUB_TOKEN", "ACTIONS_RUNTIME_TOKEN", "RAGPROOF_JUDGE_MODEL", "JUDGE_KEY"]
)
def test_withheld_variables_cannot_become_headers(tmp_path: Path, variable: str) -> None:
    adapter = {"url": "http://127.0.0.1:1", "headers_from_env": {"Authorization": variable}}
    env = Environment(variables={variable: "secret"}, cwd=tmp_path)
    with pytest.raises(UsageError, match=f"{variable} is withheld from the pipeline"):
        http_headers(_config(tmp_path, adapter, {"api_key_env": "JUDGE_KEY"}), env)
    allowed = _config(tmp_path, {**adapter, "env_passthrough": [variable]}, {"api_key_env": "JUDGE_KEY"})
    assert http_headers(allowed, env) == {"Authorization": "secret"}


def test_retry_after_parsing() -> None:
    assert retry_after_seconds("3") == 3.0
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date in the past: no wait
    assert retry_after_seconds("soon") is None
    assert retry_after_seconds(None) is None
