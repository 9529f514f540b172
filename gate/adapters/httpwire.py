"""A lean HTTP/1.1 client on asyncio streams: a bounded pool of keep-alive connections.

Why not httpx: with dozens of requests in flight on a 2-core runner, httpx's AsyncClient
spends more CPU per request than the pipeline call is worth (its connection pool rescans
every connection on each request and wakeup, through anyio), reaching 55–63% of the ideal
throughput at concurrency 32 where plain asyncio streams reach 95% (``bench/throughput.py``
and docs/running.md). The pipeline protocol needs one thing only — POST a JSON body, read a
JSON reply — so the client does exactly that and no more:

- requests are written in one piece (TCP_NODELAY set): no Nagle/delayed-ACK stalls;
- replies are framed by Content-Length, chunked encoding, or the connection closing;
- at most ``size`` connections are open; idle ones are reused (most recent first);
- a reused connection that fails before any reply byte (the server closed it while idle)
  is retried once on a fresh connection, as other clients do;
- a body over ``max_body`` bytes is refused without reading the rest; the connection is dropped;
- connections go straight to the URL's host: no proxy (the pipeline is a service next to the
  runner); ``https`` is verified against ``ca_bundle`` (a PEM file or a certificate directory,
  from REQUESTS_CA_BUNDLE / SSL_CERT_FILE / CURL_CA_BUNDLE / SSL_CERT_DIR, see
  gate/core/network.py), else the system's OpenSSL store.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

MAX_HEAD_BYTES = 64 * 1024


class WireError(Exception):
    """The connection failed (refused, reset, closed mid-reply, not HTTP): worth retrying."""


class BodyTooLarge(Exception):
    def __init__(self, declared: int | None, cap: int) -> None:
        super().__init__(f"response of {declared} bytes" if declared is not None else "response")
        self.declared = declared
        self.cap = cap


@dataclass
class Response:
    status: int
    headers: dict[str, str]  # lower-case names; a repeated header keeps its last value
    body: bytes


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()


class ConnectionPool:
    def __init__(
        self, url: str, size: int, default_headers: dict[str, str], ca_bundle: str | None = None
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in {"http", "https"} or not parts.hostname:
            raise ValueError(f"expected an http:// or https:// URL, got {url!r}")
        self._host = parts.hostname
        self._tls = parts.scheme == "https"
        self._port = parts.port or (443 if self._tls else 80)
        self._prefix = parts.path.rstrip("/")
        default_port = self._port == (443 if self._tls else 80)
        host_header = self._host if default_port else f"{self._host}:{self._port}"
        if ":" in self._host:  # an IPv6 literal
            host_header = f"[{self._host}]" + ("" if default_port else f":{self._port}")
        fixed = {"Host": host_header, "Accept": "application/json", **default_headers}
        self._head_tail = "".join(f"{k}: {v}\r\n" for k, v in fixed.items())
        self._slots = asyncio.Semaphore(size)
        self._idle: list[_Connection] = []
        self._ssl: ssl.SSLContext | None = None
        if self._tls:
            is_dir = ca_bundle is not None and os.path.isdir(ca_bundle)
            self._ssl = ssl.create_default_context(
                cafile=None if is_dir else ca_bundle, capath=ca_bundle if is_dir else None
            )

    async def _open(self) -> _Connection:
        try:
            reader, writer = await asyncio.open_connection(
                self._host,
                self._port,
                ssl=self._ssl,
                server_hostname=self._host if self._tls else None,
                limit=MAX_HEAD_BYTES,
            )
        except (OSError, ssl.SSLError) as exc:
            raise WireError(f"cannot connect ({type(exc).__name__})") from None
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return _Connection(reader, writer)

    async def post(self, path: str, body: bytes, max_body: int) -> Response:
        """POST ``body`` (JSON) to ``path``; a reply body over ``max_body`` bytes raises BodyTooLarge."""
        request = (
            f"POST {self._prefix}{path} HTTP/1.1\r\n{self._head_tail}"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode("latin-1") + body
        async with self._slots:
            while self._idle:
                conn = self._idle.pop()
                result = await self._exchange(conn, request, max_body, reused=True)
                if result is not None:
                    return result
            result = await self._exchange(await self._open(), request, max_body, reused=False)
            assert result is not None
            return result

    async def _exchange(
        self, conn: _Connection, request: bytes, max_body: int, *, reused: bool
    ) -> Response | None:
        """The reply, or None when a reused connection turned out closed before replying."""
        keep = False
        try:
            try:
                conn.writer.write(request)
                await conn.writer.drain()
                head = await conn.reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError) as exc:
                if reused and not getattr(exc, "partial", b""):
                    return None
                raise
            response, keep = await self._read_reply(conn.reader, head, max_body)
            return response
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as exc:
            raise WireError(f"connection lost ({type(exc).__name__})") from None
        except asyncio.LimitOverrunError:
            raise WireError("response head too large") from None
        finally:
            if keep:
                self._idle.append(conn)
            else:
                conn.close()

    async def _read_reply(
        self, reader: asyncio.StreamReader, head: bytes, max_body: int
    ) -> tuple[Response, bool]:
        try:
            status_line, _, header_block = head.decode("latin-1").partition("\r\n")
            version, code = status_line.split(" ", 2)[:2]
            status = int(code)
        except ValueError:
            raise WireError("not an HTTP response") from None
        if not version.startswith("HTTP/1."):
            raise WireError("not an HTTP/1.x response")
        headers: dict[str, str] = {}
        for line in header_block.split("\r\n"):
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        keep = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
        if status in (204, 304) or 100 <= status < 200:
            body = b""  # no body by definition (RFC 9112 section 6.3)
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            body = await self._read_chunked(reader, max_body)
        elif "content-length" in headers:
            try:
                length = int(headers["content-length"])
            except ValueError:
                raise WireError("bad Content-Length") from None
            if length > max_body:
                raise BodyTooLarge(length, max_body)
            body = await reader.readexactly(length)
        else:
            body = await self._read_to_end(reader, max_body)
            keep = False
        return Response(status, headers, body), keep

    @staticmethod
    async def _read_to_end(reader: asyncio.StreamReader, max_body: int) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while data := await reader.read(65536):
            size += len(data)
            if size > max_body:
                raise BodyTooLarge(None, max_body)
            chunks.append(data)
        return b"".join(chunks)

    @staticmethod
    async def _read_chunked(reader: asyncio.StreamReader, max_body: int) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while True:
            line = await reader.readuntil(b"\r\n")
            try:
                length = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise WireError("bad chunked encoding") from None
            if length == 0:
                while (await reader.readuntil(b"\r\n")) != b"\r\n":
                    pass  # trailers
                return b"".join(chunks)
            size += length
            if size > max_body:
                raise BodyTooLarge(None, max_body)
            chunks.append(await reader.readexactly(length))
            await reader.readexactly(2)

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
