"""HTTP clients for judge models: OpenAI-compatible chat completions and Anthropic messages.

Both send temperature 0 (the configured value, 0 by default) on every request and ask for a
JSON object only. Transient failures (429, 500, 502, 503, 504, connection errors and read
timeouts) are retried by urllib3's ``Retry`` with exponential backoff, honouring a
``Retry-After`` header on 429 and 503. Anything still failing raises
:class:`gate.core.errors.JudgeError` with one line naming the status.

Proxies and the CA bundle come from the run's environment (:class:`gate.core.network.
NetworkSettings`: ``HTTPS_PROXY``, ``NO_PROXY``, ``REQUESTS_CA_BUNDLE``, ``SSL_CERT_FILE`` ...);
``.netrc`` is never read.

Token usage is taken from the provider's ``usage`` block; when it is absent both counts are
estimated at 4 characters per token and the reply is flagged ``usage_estimated``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3.exceptions import ReadTimeoutError
from urllib3.util.retry import Retry

from gate.core.errors import JudgeError
from gate.core.network import NetworkSettings
from gate.model.config import JudgeConfig

CHARS_PER_TOKEN = 4
RETRY_STATUSES = (429, 500, 502, 503, 504)
DEFAULT_BASE_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}
ANTHROPIC_VERSION = "2023-06-01"


def estimate_tokens(text: str) -> int:
    """Tokens in ``text`` at 4 characters per token, rounded up (0 for empty text)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


@dataclass(frozen=True)
class Message:
    role: str  # "system" | "user" | "assistant"
    content: str


@dataclass(frozen=True)
class Completion:
    """One judge reply: its text and the tokens it cost."""

    text: str
    input_tokens: int
    output_tokens: int
    usage_estimated: bool


class ChatClient(Protocol):
    def complete(self, messages: list[Message], schema: dict[str, Any] | None) -> Completion: ...

    def close(self) -> None: ...


MAX_RETRY_AFTER_S = 60.0


class _CappedRetry(Retry):
    """urllib3's Retry with ``Retry-After`` honoured up to :data:`MAX_RETRY_AFTER_S` seconds."""

    def get_retry_after(self, response: Any) -> float | None:
        seconds = super().get_retry_after(response)
        return None if seconds is None else min(seconds, MAX_RETRY_AFTER_S)


def _session(retries: int, pool_size: int) -> requests.Session:
    retry = _CappedRetry(
        total=retries,
        connect=retries,
        read=retries,
        status=retries,
        other=0,
        status_forcelist=RETRY_STATUSES,
        allowed_methods=frozenset({"POST"}),
        backoff_factor=0.25,
        backoff_max=10.0,
        respect_retry_after_header=True,
        # The final response of an exhausted status retry is returned, so the error message
        # can name the status instead of urllib3's MaxRetryError text.
        raise_on_status=False,
    )
    adapter = HTTPAdapter(max_retries=retry, pool_connections=1, pool_maxsize=max(1, pool_size))
    session = requests.Session()
    session.trust_env = False  # proxies and CAs come per request from NetworkSettings
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


def _completion(
    messages: list[Message], text: str, data: dict[str, Any], in_key: str, out_key: str
) -> Completion:
    """The reply with the provider's token counts, else 4-characters-per-token estimates."""
    usage = data.get("usage")
    if not isinstance(usage, dict):
        usage = {}
    tokens_in, tokens_out = usage.get(in_key), usage.get(out_key)
    if isinstance(tokens_in, int) and isinstance(tokens_out, int):
        return Completion(text, tokens_in, tokens_out, False)
    prompt = "".join(m.content for m in messages)
    return Completion(text, estimate_tokens(prompt), estimate_tokens(text), True)


def _without_credentials(url: str) -> str:
    """``url`` without a ``user:password@`` part, for messages."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    return urlunsplit(parts._replace(netloc=f"{host}:{parts.port}" if parts.port else host))


def _timed_out(exc: requests.exceptions.RequestException) -> bool:
    """True for a read timeout, also when urllib3 wrapped it after exhausting its retries."""
    if isinstance(exc, requests.exceptions.Timeout):
        return True
    reason = getattr(exc.args[0] if exc.args else None, "reason", None)
    return isinstance(reason, ReadTimeoutError)


class _HTTPChatClient:
    """Shared transport: one pooled session, timeouts, retries, errors as JudgeError."""

    def __init__(
        self, config: JudgeConfig, api_key: str | None, network: NetworkSettings | None = None
    ) -> None:
        self.network = network or NetworkSettings()
        self.base_url = (config.base_url or DEFAULT_BASE_URLS[config.provider]).rstrip("/")
        self.model = config.model or ""
        self.api_key = api_key
        self.temperature = config.temperature
        self.timeout_s = config.timeout_s
        self.max_output_tokens = config.max_output_tokens
        self.response_format = config.response_format
        self._session = _session(config.retries, config.concurrency)

    def _post(self, url: str, headers: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        try:
            return self._post_json(url, headers, body)
        except JudgeError as exc:
            shown = _without_credentials(url)
            raise JudgeError(str(exc).replace(url, shown)) from None

    def _post_json(self, url: str, headers: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        try:
            response = self._session.post(
                url, headers=headers, json=body, timeout=self.timeout_s, **self.network.requests_options(url)
            )
        except requests.exceptions.RetryError as exc:
            raise JudgeError(f"judge request to {url} failed after retries: {exc}") from None
        except requests.exceptions.RequestException as exc:
            if _timed_out(exc):
                raise JudgeError(f"judge request to {url} timed out after {self.timeout_s:g} s") from None
            raise JudgeError(f"judge request to {url} failed: {type(exc).__name__}") from None
        if response.status_code != 200:
            detail = response.text[:200]
            raise JudgeError(f"judge endpoint {url} answered HTTP {response.status_code}: {detail}")
        try:
            data = response.json()
        except ValueError:
            raise JudgeError(f"judge endpoint {url} returned a body that is not JSON") from None
        if not isinstance(data, dict):
            raise JudgeError(f"judge endpoint {url} returned JSON that is not an object")
        return data

    def close(self) -> None:
        self._session.close()


class OpenAIChatClient(_HTTPChatClient):
    """``POST {base_url}/chat/completions`` (OpenAI, gateways, vLLM, Ollama, LiteLLM ...)."""

    def request_body(self, messages: list[Message], schema: dict[str, Any] | None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "temperature": self.temperature,
            "max_tokens": self.max_output_tokens,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
        }
        if self.response_format == "json_object":
            body["response_format"] = {"type": "json_object"}
        elif self.response_format == "json_schema" and schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "verdict", "schema": schema},
            }
        return body

    def complete(self, messages: list[Message], schema: dict[str, Any] | None) -> Completion:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        url = f"{self.base_url}/chat/completions"
        data = self._post(url, headers, self.request_body(messages, schema))
        try:
            text = data["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise JudgeError(f"judge endpoint {url} returned no choices[0].message.content") from None
        if not isinstance(text, str):
            raise JudgeError(f"judge endpoint {url} returned a non-text message content")
        return _completion(messages, text, data, "prompt_tokens", "completion_tokens")


class AnthropicChatClient(_HTTPChatClient):
    """``POST {base_url}/v1/messages`` (Anthropic's messages API; the system prompt is separate)."""

    def request_body(self, messages: list[Message], schema: dict[str, Any] | None) -> dict[str, Any]:
        system = "\n\n".join(m.content for m in messages if m.role == "system")
        turns = [{"role": m.role, "content": m.content} for m in messages if m.role != "system"]
        body: dict[str, Any] = {
            "model": self.model,
            "temperature": self.temperature,
            "max_tokens": self.max_output_tokens,
            "messages": turns,
        }
        if system:
            body["system"] = system
        return body

    def complete(self, messages: list[Message], schema: dict[str, Any] | None) -> Completion:
        headers = {"Content-Type": "application/json", "anthropic-version": ANTHROPIC_VERSION}
        if self.api_key:
            headers["x-api-key"] = self.api_key
        url = f"{self.base_url}/v1/messages"
        data = self._post(url, headers, self.request_body(messages, schema))
        blocks = data.get("content")
        if not isinstance(blocks, list):
            raise JudgeError(f"judge endpoint {url} returned no content blocks")
        text = "".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")
        return _completion(messages, text, data, "input_tokens", "output_tokens")


def make_client(
    config: JudgeConfig, api_key: str | None, network: NetworkSettings | None = None
) -> ChatClient:
    """A chat client for ``config.provider`` ("openai" or "anthropic"); ``network``: the
    proxies and CA bundle of the environment (None: direct, certifi's CAs)."""
    if config.provider == "anthropic":
        return AnthropicChatClient(config, api_key, network)
    return OpenAIChatClient(config, api_key, network)


def canonical_json(value: Any) -> str:
    """Compact, key-sorted JSON: the form hashed for cache keys."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
