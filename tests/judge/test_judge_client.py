"""Client details: request shapes, credentials kept out of messages, Retry-After capped."""

from __future__ import annotations

import pytest
from judge_helpers import judge_config
from servers.judge_server import JudgeServer, reply, status

from gate.core.errors import JudgeError
from gate.judge.client import MAX_RETRY_AFTER_S, Message, _CappedRetry, estimate_tokens, make_client


def test_estimate_tokens_rounds_up() -> None:
    assert [estimate_tokens("x" * n) for n in (0, 1, 4, 5, 8)] == [0, 1, 1, 2, 2]


def test_error_message_hides_url_credentials() -> None:
    with JudgeServer() as server:
        server.script(status(401))
        url = server.openai_url.replace("http://", "http://user:secret@")
        client = make_client(judge_config(url, retries=0), None)
        with pytest.raises(JudgeError) as err:
            client.complete([Message("user", "hi")], None)
    assert "HTTP 401" in str(err.value) and "secret" not in str(err.value)
    assert f"{server.openai_url}/chat/completions" in str(err.value)


def test_empty_content_is_returned_for_the_reply_parser() -> None:
    with JudgeServer() as server:
        server.script(reply(""))
        client = make_client(judge_config(server.openai_url), None)
        completion = client.complete([Message("user", "hi")], None)
    assert completion.text == ""


def test_retry_after_is_capped() -> None:
    class Response:
        headers = {"Retry-After": "86400"}

        def getheader(self, name: str) -> str | None:
            return self.headers.get(name)

    assert _CappedRetry(total=1).get_retry_after(Response()) == MAX_RETRY_AFTER_S
