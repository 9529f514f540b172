"""A scripted RAG pipeline over real HTTP on 127.0.0.1 (tests and bench).

POST /retrieve {"question", "k"} and POST /answer {"question"}. The behaviour is chosen by the
question's first word (``behaviour: rest of the question``):

- ``ok`` (or no known prefix): chunks ``doc-1..doc-k`` and the answer ``"answer: <question>"``
- ``flaky``: HTTP 500 on the first request for this question and path, then ok
- ``always500``: HTTP 503 every time
- ``ratelimit``: HTTP 429 with ``Retry-After: 1`` the first time, then ok
- ``hang``: sleeps ``hang_s`` before answering (past the client's timeout)
- ``drop``: closes the connection without a response the first time, then ok
- ``dropalways``: closes the connection without a response every time
- ``malformed``: HTTP 200 with a body that is not JSON
- ``huge``: HTTP 200 with a 50 MB JSON body (Content-Length declared)
- ``hugestream``: the same 50 MB body without Content-Length (ends when the connection closes)
- ``bad``: HTTP 422 (a client error: no retry)
- ``chunked``: an ok reply sent with chunked transfer encoding
- ``nocontent``: HTTP 204 with no body and no Content-Length (the connection stays open)
- ``stale``: an ok reply, then the server closes the connection without saying so (as an
  idle keep-alive timeout does), so the client's next request on it finds it dead

Every request is recorded (path, question, monotonic time) for assertions on exact counts.
Run as a script for the benchmark: ``python pipeline_server.py --latency-ms 50`` prints the
port on stdout and serves until killed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import ssl
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HUGE_BYTES = 50 * 1024 * 1024


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128
    allow_reuse_address = True

    def __init__(self, pipeline: PipelineServer) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.pipeline = pipeline


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.pipeline.accepted += 1
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(
        self, status: int, body: bytes, headers: dict[str, str] | None = None, length: bool = True
    ) -> None:
        head = [f"HTTP/1.1 {status} {self.responses.get(status, ('',))[0]}", "Content-Type: application/json"]
        if length:
            head.append(f"Content-Length: {len(body)}")
        else:
            head.append("Connection: close")
            self.close_connection = True
        head += [f"{k}: {v}" for k, v in (headers or {}).items()]
        # One write per response: the head and body leave in one piece.
        try:
            self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def do_POST(self) -> None:
        pipeline = self.server.pipeline
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            payload = json.loads(raw)
        except json.JSONDecodeError:
            self._send(400, b'{"error": "bad json"}')
            return
        question = str(payload.get("question", ""))
        behaviour = question.split(":", 1)[0].strip() if ":" in question else "ok"
        seen = pipeline.record(self.path, question, dict(self.headers))
        if pipeline.latency_s:
            time.sleep(pipeline.latency_s)
        if self.path not in ("/retrieve", "/answer", "/v1/retrieve", "/v1/answer"):
            self._send(404, b'{"error": "no such path"}')
            return
        first = seen == 1
        if behaviour == "flaky" and first or behaviour == "always500":
            self._send(500 if behaviour == "flaky" else 503, b'{"error": "internal"}')
            return
        if behaviour == "ratelimit" and first:
            self._send(429, b'{"error": "slow down"}', {"Retry-After": "1"})
            return
        if behaviour == "hang":
            time.sleep(pipeline.hang_s)
        if behaviour == "dropalways" or behaviour == "drop" and first:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if behaviour == "malformed":
            self._send(200, b'{"text": "unterminated')
            return
        if behaviour in ("huge", "hugestream"):
            body = b'{"text": "' + b"x" * HUGE_BYTES + b'"}'
            self._send(200, body, length=behaviour == "huge")
            return
        if behaviour == "bad":
            self._send(422, b'{"error": "question rejected"}')
            return
        if behaviour == "nocontent":
            self.wfile.write(b"HTTP/1.1 204 No Content\r\n\r\n")
            self.wfile.flush()
            return
        if behaviour == "chunked":
            body = json.dumps({"text": f"answer: {question}"}).encode()
            pieces = [body[:5], body[5:]]
            encoded = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"
            head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            self.wfile.write(head.encode() + encoded)
            self.wfile.flush()
            return
        if self.path.endswith("/retrieve"):
            k = int(payload.get("k", 3))
            result: Any = [
                {"id": f"doc-{i}", "text": f"passage {i} about {question}"} for i in range(1, k + 1)
            ]
        else:
            result = {"text": f"answer: {question}", "citations": ["doc-1"]}
        self._send(200, json.dumps(result).encode())
        if behaviour == "stale":
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)


class PipelineServer:
    """Start with ``with PipelineServer() as server:``; ``server.url`` is the base URL."""

    def __init__(
        self, latency_s: float = 0.0, hang_s: float = 3.0, *, tls: ssl.SSLContext | None = None
    ) -> None:
        self.latency_s = latency_s
        self.hang_s = hang_s
        self.requests: list[tuple[str, str, float]] = []
        self.headers_seen: list[dict[str, str]] = []
        self._counts: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()
        self.accepted = 0
        self._httpd = _Server(self)
        self.scheme = "https" if tls else "http"
        if tls is not None:
            self._httpd.socket = tls.wrap_socket(self._httpd.socket, server_side=True)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        assert isinstance(host, str)  # an IP address: the server listens on 127.0.0.1
        return f"{self.scheme}://{host}:{port}"

    def connections(self) -> int:
        """How many connections the server has accepted."""
        return self.accepted

    def record(self, path: str, question: str, headers: dict[str, str]) -> int:
        with self._lock:
            self.requests.append((path, question, time.monotonic()))
            self.headers_seen.append(headers)
            self._counts[(path, question)] += 1
            return self._counts[(path, question)]

    def count(self, path: str, question: str) -> int:
        with self._lock:
            return self._counts[(path, question)]

    def times(self, path: str, question: str) -> list[float]:
        with self._lock:
            return [t for p, q, t in self.requests if p == path and q == question]

    def __enter__(self) -> PipelineServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def main() -> None:
    parser = argparse.ArgumentParser(description="scripted RAG pipeline server")
    parser.add_argument("--latency-ms", type=float, default=0.0)
    args = parser.parse_args()
    server = PipelineServer(latency_s=args.latency_ms / 1000.0)
    server.requests = _Discard()  # the benchmark sends many requests: keep no log
    with server:
        print(server.url.rsplit(":", 1)[1], flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


class _Discard(list[tuple[str, str, float]]):
    def append(self, item: tuple[str, str, float]) -> None:
        pass


if __name__ == "__main__":
    main()
