"""The ``http`` adapter: POST JSON to ``{url}/retrieve`` and ``{url}/answer``.

Requests: ``{"question": ..., "k": ...}`` to the retrieve path, ``{"question": ...}`` to the
answer path (the case id is never sent: a pipeline must not be able to look answers up).

Client: one ``httpx.AsyncClient`` whose pool holds ``adapter.concurrency`` keep-alive
connections, driven from the runner's event loop. A thread per request (``requests``) spends
about 1.5 ms of CPU per call on locking and thread switches, which caps a 2-core runner near
0.78 of the ideal throughput at concurrency 32; the event loop keeps that overhead off the
critical path (see ``bench/throughput.py``).

Failures:
- connection errors (refused, reset, dropped mid-response), 429 and 5xx are retried up to
  ``adapter.retries`` times, waiting ``backoff_s * 2**attempt`` plus up to ``backoff_s`` of
  random jitter, or the server's ``Retry-After`` (seconds or an HTTP date) when it sends one;
- any other non-2xx status is an adapter error at once (a 4xx will not fix itself);
- a read timeout is a ``timeout`` row (the runner also enforces ``timeout_s`` per case);
- a body over ``adapter.max_response_bytes``, or one that is not JSON, is an adapter error.
"""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

from gate.adapters.base import AdapterError, AdapterTimeout, CallAdapter, parse_answer, parse_chunks
from gate.config import AdapterConfig
from gate.records import Answer, Chunk

RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})


def _printable(raw: bytes, limit: int = 200) -> str:
    text = raw[:limit].decode("utf-8", errors="replace")
    return "".join(ch if ch.isprintable() else " " for ch in text).strip()


def retry_after_seconds(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or HTTP date); None if absent/invalid."""
    if not value:
        return None
    from urllib3.exceptions import InvalidHeader
    from urllib3.util.retry import Retry

    try:
        return max(0.0, float(Retry().parse_retry_after(value)))
    except (InvalidHeader, ValueError):
        return None


class _Retryable(Exception):
    def __init__(self, message: str, delay: float | None = None) -> None:
        super().__init__(message)
        self.delay = delay


class HttpAdapter(CallAdapter):
    def __init__(self, config: AdapterConfig, headers: dict[str, str]) -> None:
        assert config.url is not None
        self._base = config.url.rstrip("/")
        self._paths = {"retrieve": config.retrieve_path, "answer": config.answer_path}
        self.supports_retrieve = "retrieve" in config.methods and bool(config.retrieve_path)
        self.supports_answer = "answer" in config.methods and bool(config.answer_path)
        self._headers = headers
        self._timeout_s = config.timeout_s
        self._concurrency = config.concurrency
        self._retries = config.retries
        self._backoff_s = config.backoff_s
        self._max_bytes = config.max_response_bytes
        self._client: Any = None

    async def start(self) -> None:
        import httpx

        limits = httpx.Limits(max_connections=self._concurrency, max_keepalive_connections=self._concurrency)
        # trust_env=False: proxies and .netrc come from the process environment, which this
        # layer does not read; the pipeline URL is used exactly as configured.
        self._client = httpx.AsyncClient(
            headers=self._headers,
            timeout=httpx.Timeout(self._timeout_s),
            limits=limits,
            follow_redirects=False,
            trust_env=False,
        )

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def retrieve(self, question: str, k: int) -> list[Chunk]:
        return parse_chunks(await self._post("retrieve", {"question": question, "k": k}))

    async def answer(self, question: str) -> Answer:
        return parse_answer(await self._post("answer", {"question": question}))

    def _backoff(self, attempt: int) -> float:
        return self._backoff_s * (2**attempt) + random.uniform(0, self._backoff_s)

    async def _post(self, call: str, payload: dict[str, Any]) -> Any:
        path = self._paths[call] or ""
        for attempt in range(self._retries + 1):
            try:
                return await self._post_once(path, payload)
            except _Retryable as failure:
                if attempt == self._retries:
                    tries = f" (after {self._retries} retries)" if self._retries else ""
                    raise AdapterError(f"{failure}{tries}") from None
                delay = failure.delay if failure.delay is not None else self._backoff(attempt)
                await asyncio.sleep(min(delay, self._timeout_s))
        raise AssertionError("unreachable")

    async def _post_once(self, path: str, payload: dict[str, Any]) -> Any:
        import httpx

        url = self._base + path
        try:
            async with self._client.stream("POST", url, json=payload) as response:
                status = response.status_code
                if status in RETRYABLE_STATUS:
                    delay = retry_after_seconds(response.headers.get("retry-after"))
                    raise _Retryable(f"POST {path}: HTTP {status}", delay)
                if not 200 <= status < 300:
                    snippet = _printable(await self._read(response, 4096, path, truncate=True))
                    raise AdapterError(f"POST {path}: HTTP {status}" + (f": {snippet}" if snippet else ""))
                body = await self._read(response, self._max_bytes, path)
        except httpx.TimeoutException:
            raise AdapterTimeout(f"POST {path}: no response within {self._timeout_s:g} s") from None
        except httpx.TransportError as exc:
            raise _Retryable(f"POST {path}: connection error ({type(exc).__name__})") from None
        try:
            return json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise AdapterError(f"POST {path}: response is not valid JSON ({exc})") from None

    @staticmethod
    async def _read(response: Any, cap: int, path: str, *, truncate: bool = False) -> bytes:
        """The body, at most ``cap`` bytes: longer is an error, or cut short with ``truncate``."""
        declared = response.headers.get("content-length")
        if not truncate and declared is not None and declared.isdigit() and int(declared) > cap:
            raise AdapterError(
                f"POST {path}: response of {int(declared)} bytes exceeds max_response_bytes={cap}"
            )
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > cap:
                if truncate:
                    chunks.append(chunk[: cap - (size - len(chunk))])
                    break
                raise AdapterError(f"POST {path}: response exceeds max_response_bytes={cap}")
            chunks.append(chunk)
        return b"".join(chunks)
