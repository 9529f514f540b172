"""The ``http`` adapter: POST JSON to ``{url}/retrieve`` and ``{url}/answer``.

Requests: ``{"question": ..., "k": ...}`` to the retrieve path, ``{"question": ...}`` to the
answer path (the case id is never sent: a pipeline must not be able to look answers up).

Client: :mod:`gate.adapters.httpwire`, a pool of keep-alive connections driven from the
runner's event loop (two per case in flight when both calls are used). Why not ``requests``
on threads or ``httpx``: see that module and docs/running.md (measured in
``bench/throughput.py``).

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

from gate import __version__
from gate.adapters.base import AdapterError, AdapterTimeout, CallAdapter, parse_answer, parse_chunks
from gate.adapters.httpwire import BodyTooLarge, ConnectionPool, WireError
from gate.model.config import AdapterConfig
from gate.model.records import Answer, Chunk


def is_retryable(status: int) -> bool:
    """429 (rate limited) and every 5xx are retried; other non-2xx statuses are final."""
    return status == 429 or 500 <= status <= 599


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
    def __init__(self, config: AdapterConfig, headers: dict[str, str], ca_bundle: str | None = None) -> None:
        assert config.url is not None
        self._ca_bundle = ca_bundle
        self._url = config.url
        self._paths = {"retrieve": config.retrieve_path, "answer": config.answer_path}
        self.supports_retrieve = "retrieve" in config.methods and bool(config.retrieve_path)
        self.supports_answer = "answer" in config.methods and bool(config.answer_path)
        self._headers = {"User-Agent": f"ragproof/{__version__}", **headers}
        self._timeout_s = config.timeout_s
        # Retrieve and answer of one case run at the same time: two connections per case.
        self._connections = config.concurrency * max(
            1, int(self.supports_retrieve) + int(self.supports_answer)
        )
        self._retries = config.retries
        self._backoff_s = config.backoff_s
        self._max_bytes = config.max_response_bytes
        self._pool: ConnectionPool | None = None

    async def start(self) -> None:
        self._pool = ConnectionPool(self._url, self._connections, self._headers, self._ca_bundle)

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    async def retrieve(self, question: str, k: int) -> list[Chunk]:
        return parse_chunks(await self._post("retrieve", {"question": question, "k": k}))

    async def answer(self, question: str) -> Answer:
        return parse_answer(await self._post("answer", {"question": question}))

    def _backoff(self, attempt: int) -> float:
        return self._backoff_s * 2.0**attempt + random.uniform(0, self._backoff_s)

    async def _post(self, call: str, payload: dict[str, Any]) -> Any:
        path = self._paths[call] or ""
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        for attempt in range(self._retries + 1):
            try:
                return await self._post_once(path, body)
            except _Retryable as failure:
                if attempt == self._retries:
                    tries = f" (after {self._retries} retries)" if self._retries else ""
                    raise AdapterError(f"{failure}{tries}") from None
                delay = failure.delay if failure.delay is not None else self._backoff(attempt)
                await asyncio.sleep(min(delay, self._timeout_s))
        raise AssertionError("unreachable")

    async def _post_once(self, path: str, body: bytes) -> Any:
        assert self._pool is not None, "start() not called"
        try:
            async with asyncio.timeout(self._timeout_s):
                response = await self._pool.post(path, body, self._max_bytes)
        except TimeoutError:
            raise AdapterTimeout(f"POST {path}: no response within {self._timeout_s:g} s") from None
        except WireError as exc:
            raise _Retryable(f"POST {path}: {exc}") from None
        except BodyTooLarge as exc:
            size = f" of {exc.declared} bytes" if exc.declared is not None else ""
            raise AdapterError(f"POST {path}: response{size} exceeds max_response_bytes={exc.cap}") from None
        status = response.status
        if is_retryable(status):
            raise _Retryable(
                f"POST {path}: HTTP {status}", retry_after_seconds(response.headers.get("retry-after"))
            )
        if not 200 <= status < 300:
            snippet = _printable(response.body)
            raise AdapterError(f"POST {path}: HTTP {status}" + (f": {snippet}" if snippet else ""))
        try:
            return json.loads(response.body)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise AdapterError(f"POST {path}: response is not valid JSON ({exc})") from None
