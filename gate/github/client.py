"""The one REST client of the action: ghapi's endpoint surface over requests + urllib3 Retry.

ghapi builds every call from GitHub's OpenAPI description (path templates, parameter names),
so a misspelt endpoint or parameter fails loudly. Its own transport does not retry on
server errors or rate limits, so the ghapi operations used here are bound to a transport
over a ``requests.Session`` whose adapters carry :class:`GitHubRetry`.

Retry policy (per request):
- connection failures: up to 3 retries; read timeouts: up to 2;
- 500, 502, 503, 504 and 429: up to ``status_retries`` retries with exponential backoff
  (``backoff_factor * 2**(n-1)`` seconds, the first retry immediate);
- 403 only when it is a rate limit: a ``Retry-After`` header (secondary rate limit) or
  ``x-ratelimit-remaining: 0`` (primary). A plain 403 is a permission failure and never retried;
- the wait honours ``Retry-After`` (seconds or an HTTP date) and otherwise
  ``x-ratelimit-reset`` (epoch seconds) when the quota is exhausted;
- a secondary-rate-limit 403 without those headers (its message says so) is retried after
  ``headerless_wait`` seconds (GitHub asks for at least a minute), at most twice;
- the waits of all requests of one client (one action step) together are bounded by
  ``max_total_wait``: a request that would need a longer wait fails at once with a message
  saying how long GitHub asked for, so a throttled step ends in minutes, not hours.

Every request has a (connect, read) timeout. A 403/404 that is not a rate limit names the
``permissions:`` entry the workflow must grant for that call.

Artifact downloads answer with a redirect to blob storage; the redirect is followed by hand
with a separate session that carries no credentials, so the token never leaves the API host.

Proxies (``HTTPS_PROXY``, ``NO_PROXY`` ...) and the CA bundle (``REQUESTS_CA_BUNDLE``,
``SSL_CERT_FILE`` ...) come from the step's environment as :class:`gate.core.network.
NetworkSettings`, for the API and the blob storage alike; ``.netrc`` is never read.
"""

from __future__ import annotations

import email.utils
import functools
import ssl
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3.connectionpool import ConnectionPool
from urllib3.exceptions import MaxRetryError, ResponseError
from urllib3.response import BaseHTTPResponse
from urllib3.util.retry import Retry

from gate import __version__
from gate.core.errors import RagproofError
from gate.core.network import NetworkSettings

API_VERSION = "2022-11-28"
USER_AGENT = f"ragproof/{__version__}"
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


class GitHubAPIError(RagproofError):
    """A REST call that failed after the retry policy; ``status`` is None for network failures."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        endpoint: str = "",
        permission: str | None = None,
        rate_limited: bool = False,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.endpoint = endpoint
        self.permission = permission
        self.rate_limited = rate_limited

    @property
    def is_permission_denied(self) -> bool:
        """403/404 that is not a rate limit: the token may not do this (or the thing is absent)."""
        return self.status in (403, 404) and not self.rate_limited


def is_rate_limited(status: int, headers: Any) -> bool:
    """Whether a 403/429 response is GitHub's (primary or secondary) rate limit."""
    if status == 429:
        return True
    if status != 403:
        return False
    return headers.get("Retry-After") is not None or headers.get("x-ratelimit-remaining") == "0"


def requested_wait(headers: Any, now: float | None = None) -> float | None:
    """Seconds GitHub asks us to wait: ``Retry-After``, else ``x-ratelimit-reset`` when exhausted."""
    retry_after = headers.get("Retry-After")
    if retry_after is not None:
        text = retry_after.strip()
        if text.isdigit():
            return float(text)
        try:
            moment = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
        return max(0.0, moment.timestamp() - (time.time() if now is None else now))
    if headers.get("x-ratelimit-remaining") == "0":
        reset = headers.get("x-ratelimit-reset")
        if reset and reset.strip().isdigit():
            # +1: the reset instant is inclusive on GitHub's side; waiting exactly to it races.
            return max(0.0, float(reset) - (time.time() if now is None else now)) + 1.0
    return None


def untrusted_certificate(error: BaseException) -> bool:
    """Whether ``error`` (urllib3's or requests') is a TLS certificate that failed verification."""
    seen: set[int] = set()
    todo: list[object] = [error]
    while todo:
        item = todo.pop()
        if not isinstance(item, BaseException) or id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, ssl.SSLCertVerificationError):
            return True
        todo += [*item.args, item.__cause__, item.__context__, getattr(item, "reason", None)]
    return False


class WaitBudget:
    """Seconds of retry waiting left, shared by every request of one client."""

    def __init__(self, seconds: float) -> None:
        self.remaining = seconds


class GitHubRetry(Retry):
    """urllib3 Retry with GitHub's rate-limit rules, spending waits from a shared budget."""

    def __init__(self, *args: Any, budget: WaitBudget | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # urllib3 makes a new Retry per attempt (new()); they all draw on the same budget.
        self.budget = budget if budget is not None else WaitBudget(120.0)
        self.next_wait = 0.0

    def new(self, **kw: Any) -> GitHubRetry:
        retry = super().new(**kw)
        retry.budget = self.budget
        return retry

    def is_retry(self, method: str, status_code: int, has_retry_after: bool = False) -> bool:
        # 403 is decided in increment(), which sees the headers.
        return status_code == 403 or super().is_retry(method, status_code, has_retry_after)

    def increment(
        self,
        method: str | None = None,
        url: str | None = None,
        response: BaseHTTPResponse | None = None,
        error: Exception | None = None,
        _pool: ConnectionPool | None = None,
        _stacktrace: TracebackType | None = None,
    ) -> GitHubRetry:
        def more(retry: Retry) -> GitHubRetry:
            assert isinstance(retry, GitHubRetry)  # new() keeps the class
            return retry

        if error is not None and untrusted_certificate(error):
            # Not transient: the same certificate fails the same way on every attempt.
            raise MaxRetryError(_pool, url or "", error)  # type: ignore[arg-type]  # urllib3 passes None outside a pool too
        if response is not None and error is None and response.status in RETRY_STATUSES | {403}:
            if not is_rate_limited(response.status, response.headers) and response.status == 403:
                raise MaxRetryError(_pool, url or "", ResponseError("403 without a rate limit"))  # type: ignore[arg-type]  # urllib3 passes None outside a pool too
            wait = requested_wait(response.headers)
            new_retry = more(super().increment(method, url, response, error, _pool, _stacktrace))
            if wait is None:
                wait = new_retry.get_backoff_time()
            if wait > self.budget.remaining:
                raise MaxRetryError(_pool, url or "", ResponseError(f"would wait {wait:.0f} s more"))  # type: ignore[arg-type]  # urllib3 passes None outside a pool too
            self.budget.remaining -= wait
            new_retry.next_wait = wait
            return new_retry
        return more(super().increment(method, url, response, error, _pool, _stacktrace))

    def sleep(self, response: Any = None) -> None:
        if response is None:  # a connection/read error: plain backoff
            super().sleep(response)
            return
        if self.next_wait > 0:
            time.sleep(self.next_wait)


def _session(*, token: str | None, retry: GitHubRetry) -> requests.Session:
    session = requests.Session()
    # No .netrc credentials, no settings read behind our back: proxies and CAs are passed per
    # request from NetworkSettings.
    session.trust_env = False
    adapter = HTTPAdapter(max_retries=retry, pool_maxsize=4)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    session.headers.update({"User-Agent": USER_AGENT})
    if token:
        session.headers.update(
            {
                "Authorization": f"Bearer {token}",
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": API_VERSION,
            }
        )
    return session


class _HTTPStatusError(Exception):
    def __init__(self, response: requests.Response) -> None:
        super().__init__(f"HTTP {response.status_code}")
        self.response = response


class _RequestsTransport:
    """The interface ghapi's operations call (``request(method, url, ...)``), over requests."""

    def __init__(
        self, session: requests.Session, timeout: tuple[float, float], network: NetworkSettings
    ) -> None:
        self.session = session
        self.timeout = timeout
        self.network = network

    def request(
        self,
        method: str,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        params: dict[str, Any] | None = None,
        json: Any = None,
        data: Any = None,
        files: Any = None,
        content: Any = None,
        raw: bool = False,
    ) -> Any:
        response = self.session.request(
            method,
            url,
            headers=headers or None,
            params=params or None,
            json=json,
            data=data if data is not None else content,
            files=files,
            timeout=self.timeout,
            **self.network.requests_options(url),
        )
        if response.status_code >= 400:
            raise _HTTPStatusError(response)
        if raw:
            return response
        return response.json() if response.content else None


def listify(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else [value]


def _message_of(response: requests.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:200].strip()
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return str(body["message"])
    return str(body)[:200]


class GitHubClient:
    """REST calls for one repository with timeouts, the retry policy and clear failures."""

    def __init__(
        self,
        *,
        api_url: str,
        repository: str,
        token: str | None,
        timeout: tuple[float, float] = (10.0, 30.0),
        max_total_wait: float = 120.0,
        status_retries: int = 4,
        backoff_factor: float = 1.0,
        headerless_wait: float = 60.0,
        network: NetworkSettings | None = None,
    ) -> None:
        self.api_url = api_url.rstrip("/")
        self.network = network or NetworkSettings()
        self.repository = repository
        self.timeout = timeout
        retry = GitHubRetry(
            total=status_retries + 3,
            connect=3,
            read=2,
            status=status_retries,
            status_forcelist=RETRY_STATUSES,
            allowed_methods=None,  # 429/5xx/rate-limit: GitHub did not act on the request
            backoff_factor=backoff_factor,
            backoff_max=30.0,
            raise_on_status=False,
            respect_retry_after_header=True,
            budget=WaitBudget(max_total_wait),
        )
        self._budget = retry.budget
        self.headerless_wait = headerless_wait
        self._session = _session(token=token, retry=retry)
        self._blob_session = _session(token=None, retry=retry)
        owner, repo = repository.split("/", 1)
        self._transport = _RequestsTransport(self._session, timeout, self.network)
        self._defaults = {"owner": owner, "repo": repo}
        self._operations: dict[str, Any] = {}

    def _operation(self, name: str) -> Any:
        """ghapi's operation ``group.name`` (from its OpenAPI table), bound to our transport.

        Only the operations used are built: ``GhApi()`` builds all ~1,000 of them (~0.3 s).
        """
        operation = self._operations.get(name)
        if operation is None:
            from fastspec.oapi import SyncOpFunc
            from ghapi.core import pspec

            group, _, op_name = name.rpartition(".")
            spec = next((o for o in pspec.ops if o.name == op_name and group in listify(o.group)), None)
            if spec is None:
                raise ValueError(f"ghapi has no operation {name!r}")
            operation = SyncOpFunc(spec, self._transport, self.api_url, defaults=self._defaults)
            self._operations[name] = operation
        return operation

    def _fail(self, endpoint: str, permission: str | None, response: requests.Response) -> GitHubAPIError:
        status = response.status_code
        detail = _message_of(response)
        # A secondary limit may come without headers; its message still says so.
        limited = is_rate_limited(status, response.headers) or (
            status == 403 and "rate limit" in detail.lower()
        )
        if limited:
            wait = requested_wait(response.headers)
            more = f"; GitHub asks to wait {wait:.0f} s more" if wait is not None else ""
            return GitHubAPIError(
                f"GitHub API {endpoint}: rate limited ({status}: {detail}) after retrying{more}",
                status=status,
                endpoint=endpoint,
                permission=permission,
                rate_limited=True,
            )
        message = f"GitHub API {endpoint}: {status} {detail}"
        if status == 401:
            message += " (the token was rejected: check the github-token input)"
        elif status in (403, 404) and permission:
            message += f" (the workflow's token may lack `permissions: {permission}`; add it to the job's permissions block)"
        return GitHubAPIError(message, status=status, endpoint=endpoint, permission=permission)

    def _send(
        self, name: str, permission: str | None, send: Callable[[], requests.Response]
    ) -> requests.Response:
        """``send()`` with its failures as one GitHubAPIError naming the endpoint."""
        for attempt in range(3):
            try:
                return send()
            except _HTTPStatusError as exc:
                if attempt < 2 and self._wait_out_headerless_limit(exc.response):
                    continue
                request = exc.response.request
                endpoint = f"{request.method} {urlsplit(request.url or '').path}"
                raise self._fail(endpoint, permission, exc.response) from None
            except requests.RequestException as exc:
                hint = (
                    ": its TLS certificate is not trusted; for a private CA set REQUESTS_CA_BUNDLE or "
                    "SSL_CERT_FILE to the CA bundle"
                    if untrusted_certificate(exc)
                    else ""
                )
                raise GitHubAPIError(
                    f"GitHub API {name}: cannot reach {self.api_url} ({type(exc).__name__}){hint}",
                    endpoint=name,
                ) from None
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _wait_out_headerless_limit(self, response: requests.Response) -> bool:
        """Sleep before retrying a secondary-rate-limit 403 that names no wait, if the budget allows.

        Those with ``Retry-After`` or an exhausted quota were already retried by GitHubRetry.
        """
        if response.status_code != 403 or is_rate_limited(403, response.headers):
            return False
        if "secondary rate limit" not in _message_of(response).lower():
            return False
        if self.headerless_wait > self._budget.remaining:
            return False
        self._budget.remaining -= self.headerless_wait
        time.sleep(self.headerless_wait)
        return True

    def _call(self, name: str, permission: str | None, /, **params: Any) -> requests.Response:
        return self._send(name, permission, lambda: self._operation(name)(raw_=True, **params))

    def call(self, name: str, /, *, permission: str | None = None, **params: Any) -> Any:
        """Call the ghapi operation ``name`` (``"repos.get"``) and return the decoded JSON."""
        response = self._call(name, permission, **params)
        return response.json() if response.content else None

    def paginate(
        self, name: str, /, *, permission: str | None = None, item_key: str | None = None, **params: Any
    ) -> Iterator[dict[str, Any]]:
        """Every item of a list endpoint, following ``Link: rel="next"`` until it ends.

        ``item_key`` names the list inside an object response (``"workflow_runs"``). Items are
        yielded lazily, so a caller that finds what it wants stops fetching pages.
        """
        params.setdefault("per_page", 100)
        response = self._call(name, permission, **params)
        seen_urls: set[str] = set()
        while True:
            body = response.json()
            items = body.get(item_key, []) if item_key and isinstance(body, dict) else body
            if not isinstance(items, list):
                raise GitHubAPIError(f"GitHub API {name}: expected a list in the response", endpoint=name)
            yield from items
            next_url = response.links.get("next", {}).get("url")
            if not next_url or next_url in seen_urls:
                return
            seen_urls.add(next_url)
            if not next_url.startswith(self.api_url + "/"):
                raise GitHubAPIError(
                    f"GitHub API {name}: pagination link leaves {self.api_url}", endpoint=name
                )
            response = self._send(
                name, permission, functools.partial(self._transport.request, "GET", next_url, raw=True)
            )

    def download_artifact(self, artifact_id: int, destination: Path, *, max_bytes: int) -> int:
        """Download an artifact's zip to ``destination``; returns its size in bytes.

        The API answers with a redirect to blob storage. The redirect is followed with a
        session that has no Authorization header, and the body is capped at ``max_bytes``.
        """
        owner, repo = self.repository.split("/", 1)
        endpoint = f"GET /repos/{owner}/{repo}/actions/artifacts/{artifact_id}/zip"
        url = f"{self.api_url}/repos/{owner}/{repo}/actions/artifacts/{artifact_id}/zip"
        try:
            response = self._session.get(
                url, allow_redirects=False, timeout=self.timeout, **self.network.requests_options(url)
            )
            if response.status_code in (301, 302, 303, 307, 308):
                location = response.headers.get("Location")
                response.close()
                if not location:
                    raise GitHubAPIError(
                        f"GitHub API {endpoint}: redirect without a Location", endpoint=endpoint
                    )
                response = self._blob_session.get(
                    location, stream=True, timeout=self.timeout, **self.network.requests_options(location)
                )
            if response.status_code >= 400:
                raise self._fail(endpoint, "actions: read", response)
            declared = response.headers.get("Content-Length")
            if declared and declared.isdigit() and int(declared) > max_bytes:
                raise GitHubAPIError(
                    f"artifact {artifact_id}: {declared} bytes exceeds the {max_bytes}-byte limit",
                    endpoint=endpoint,
                )
            written = 0
            with destination.open("wb") as handle:
                for chunk in response.iter_content(chunk_size=1 << 16):
                    written += len(chunk)
                    if written > max_bytes:
                        raise GitHubAPIError(
                            f"artifact {artifact_id}: larger than the {max_bytes}-byte limit",
                            endpoint=endpoint,
                        )
                    handle.write(chunk)
            return written
        except requests.RequestException as exc:
            raise GitHubAPIError(
                f"{endpoint}: download failed ({type(exc).__name__})", endpoint=endpoint
            ) from None
