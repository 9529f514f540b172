"""An HTTP proxy on 127.0.0.1 for tests: ``CONNECT`` tunnels and forwarded plain requests,
each counted, as a corporate proxy in front of a self-hosted runner would see them.

- ``CONNECT host:port``: answers 200 and relays bytes both ways until either side closes (TLS
  stays end to end, so the client must trust the server's CA itself);
- ``GET http://host:port/path`` (absolute form, any method): forwards the request in origin
  form with ``Connection: close`` and relays the response with ``Connection: close``.

``relayed`` lists what was relayed (``{"method", "target", "upstream_port"}``); the
``upstream_port`` is the local port of the proxy's connection to the server, so a server that
records its clients' ports can tell proxied requests from direct ones. With
``require_auth=(user, password)`` a request without that ``Proxy-Authorization`` gets 407.
"""

from __future__ import annotations

import base64
import select
import socket
import socketserver
import threading
from typing import Any
from urllib.parse import urlsplit

HEAD_LIMIT = 64 * 1024


def _read_head(sock: socket.socket) -> tuple[bytes, bytes]:
    """The request or response head (up to the blank line) and whatever came after it."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
        if len(data) > HEAD_LIMIT:
            break
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


def _pipe(a: socket.socket, b: socket.socket) -> None:
    """Relay bytes between ``a`` and ``b`` until one side closes."""
    sockets = [a, b]
    while True:
        readable, _, broken = select.select(sockets, [], sockets, 30)
        if broken or not readable:
            return
        for source in readable:
            data = source.recv(65536)
            if not data:
                return
            (b if source is a else a).sendall(data)


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        client: socket.socket = self.request
        head, rest = _read_head(client)
        if not head:
            return
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        method, target, _version = request_line.split(" ", 2)
        headers = dict(line.split(":", 1) for line in header_lines if ":" in line)
        headers = {k.strip(): v.strip() for k, v in headers.items()}
        owner = self.server.owner
        if owner.require_auth is not None:
            expected = "Basic " + base64.b64encode(":".join(owner.require_auth).encode()).decode()
            given = next((v for k, v in headers.items() if k.lower() == "proxy-authorization"), None)
            if given != expected:
                client.sendall(
                    b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                    b'Proxy-Authenticate: Basic realm="test"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n'
                )
                owner.record(method, target, None, authorized=False)
                return
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
            upstream = socket.create_connection((host.strip("[]"), int(port)), timeout=30)
            owner.record(method, target, upstream.getsockname()[1])
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            if rest:
                upstream.sendall(rest)
            with upstream:
                _pipe(client, upstream)
            return
        url = urlsplit(target)
        upstream = socket.create_connection((url.hostname or "", url.port or 80), timeout=30)
        owner.record(method, target, upstream.getsockname()[1])
        kept = [
            f"{k}: {v}"
            for k, v in headers.items()
            if k.lower() not in ("proxy-authorization", "proxy-connection", "connection", "keep-alive")
        ]
        path = url.path + (f"?{url.query}" if url.query else "")
        forwarded = "\r\n".join([f"{method} {path or '/'} HTTP/1.1", *kept, "Connection: close"])
        with upstream:
            upstream.sendall(forwarded.encode("latin-1") + b"\r\n\r\n" + rest)
            length = int(next((v for k, v in headers.items() if k.lower() == "content-length"), "0"))
            while len(rest) < length:  # the rest of the request body
                chunk = client.recv(65536)
                if not chunk:
                    break
                rest += chunk
                upstream.sendall(chunk)
            response_head, body = _read_head(upstream)
            lines = [
                line
                for line in response_head.decode("latin-1").split("\r\n")
                if not line.lower().startswith(("connection:", "keep-alive:"))
            ]
            client.sendall("\r\n".join([*lines, "Connection: close"]).encode("latin-1") + b"\r\n\r\n" + body)
            while True:
                chunk = upstream.recv(65536)
                if not chunk:
                    break
                client.sendall(chunk)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, owner: ProxyServer) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.owner = owner


class ProxyServer:
    """A counting proxy; use as a context manager. ``url`` is what HTTPS_PROXY is set to."""

    def __init__(self, require_auth: tuple[str, str] | None = None) -> None:
        self.require_auth = require_auth
        self.relayed: list[dict[str, Any]] = []
        self.refused = 0
        self._lock = threading.Lock()
        self._server = _Server(self)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05})
        self._thread.daemon = True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def record(self, method: str, target: str, upstream_port: int | None, *, authorized: bool = True) -> None:
        with self._lock:
            if authorized:
                self.relayed.append({"method": method, "target": target, "upstream_port": upstream_port})
            else:
                self.refused += 1

    @property
    def upstream_ports(self) -> set[int]:
        with self._lock:
            return {r["upstream_port"] for r in self.relayed}

    def __enter__(self) -> ProxyServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
