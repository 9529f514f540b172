"""A scripted judge over real HTTP on 127.0.0.1: OpenAI chat completions and Anthropic messages.

Routes: ``POST /v1/chat/completions`` (base URL ``server.openai_url``) and ``POST /v1/messages``
(base URL ``server.url``). Each request is counted and its JSON body logged. What the server
answers is decided, in order, by:

1. the queue of scripted steps (``server.script(step, ...)``), consumed one per request;
2. else the ``responder`` callable (request body -> Step), e.g. an oracle for calibration;
3. else a default reply ``{"declined": false}`` ... which fails most schemas on purpose.

Steps: ``reply(text)`` (a completion whose message content is ``text``), ``status(code,
retry_after=...)`` (an error response), ``slow(seconds, text)`` (waits, then replies; ``stop()``
or ``release.set()`` ends the wait early). Every response is written in one piece with
Content-Length; sockets have TCP_NODELAY. ``replies`` counts the responses written.
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast


@dataclass(frozen=True)
class Step:
    status: int = 200
    text: str | None = None  # the reply content for a 200
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    usage: tuple[int, int] | None = (100, 20)  # (input, output) tokens reported; None: no usage block


def reply(text: str | dict[str, Any], usage: tuple[int, int] | None = (100, 20)) -> Step:
    return Step(text=text if isinstance(text, str) else json.dumps(text), usage=usage)


def status(code: int, retry_after: float | None = None) -> Step:
    headers = {"Retry-After": f"{retry_after:g}"} if retry_after is not None else {}
    return Step(status=code, headers=headers)


def slow(seconds: float, text: str | dict[str, Any]) -> Step:
    return Step(text=text if isinstance(text, str) else json.dumps(text), delay_s=seconds)


Responder = Callable[[dict[str, Any]], Step]


def user_prompt(body: dict[str, Any]) -> str:
    """The first user message of a logged request (the rendered task prompt)."""
    for message in body.get("messages", []):
        if message.get("role") == "user":
            return cast("str", message["content"])
    return ""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128
    allow_reuse_address = True


class JudgeServer:
    def __init__(self, responder: Responder | None = None, *, tls: ssl.SSLContext | None = None) -> None:
        self.responder = responder
        self.client_ports: list[int] = []  # the client's port of each request (proxied or not)
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.headers: list[dict[str, str]] = []
        self.replies = 0
        self.release = threading.Event()  # set: slow steps stop waiting
        self._steps: deque[Step] = deque()
        self._lock = threading.Lock()
        self._httpd = _Server(("127.0.0.1", 0), self._handler_class())
        self.scheme = "https" if tls else "http"
        if tls is not None:
            self._httpd.socket = tls.wrap_socket(self._httpd.socket, server_side=True)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    # --- control ------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def openai_url(self) -> str:
        return f"{self.url}/v1"

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.requests)

    def script(self, *steps: Step) -> None:
        with self._lock:
            self._steps.extend(steps)

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.paths.clear()
            self.headers.clear()
            self._steps.clear()

    def start(self) -> JudgeServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.release.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> JudgeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- serving ------------------------------------------------------------------------

    def _next_step(self, body: dict[str, Any]) -> Step:
        with self._lock:
            if self._steps:
                return self._steps.popleft()
        if self.responder is not None:
            return self.responder(body)
        return reply({"declined": False})

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = {"_unparsed": raw.decode("utf-8", "replace")}
                with server._lock:
                    server.requests.append(body)
                    server.paths.append(self.path)
                    server.headers.append(dict(self.headers.items()))
                    server.client_ports.append(self.client_address[1])
                if self.path not in ("/v1/chat/completions", "/v1/messages"):
                    self._send(404, {"error": f"no route {self.path}"}, {})
                    return
                step = server._next_step(body)
                if step.delay_s:
                    server.release.wait(step.delay_s)
                if step.status != 200:
                    self._send(step.status, {"error": {"message": f"scripted {step.status}"}}, step.headers)
                    return
                self._send(200, self._completion(step, body), step.headers)

            def _completion(self, step: Step, body: dict[str, Any]) -> dict[str, Any]:
                text = step.text or ""
                if self.path == "/v1/messages":
                    out: dict[str, Any] = {
                        "id": "msg_test",
                        "type": "message",
                        "role": "assistant",
                        "model": body.get("model"),
                        "content": [{"type": "text", "text": text}],
                        "stop_reason": "end_turn",
                    }
                    if step.usage is not None:
                        out["usage"] = {"input_tokens": step.usage[0], "output_tokens": step.usage[1]}
                    return out
                out = {
                    "id": "chatcmpl-test",
                    "object": "chat.completion",
                    "model": body.get("model"),
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": text},
                            "finish_reason": "stop",
                        }
                    ],
                }
                if step.usage is not None:
                    out["usage"] = {
                        "prompt_tokens": step.usage[0],
                        "completion_tokens": step.usage[1],
                        "total_tokens": sum(step.usage),
                    }
                return out

            def _send(self, code: int, payload: dict[str, Any], headers: dict[str, str]) -> None:
                data = json.dumps(payload).encode()
                head = [f"HTTP/1.1 {code} {'OK' if code == 200 else 'Error'}"]
                head += ["Content-Type: application/json", f"Content-Length: {len(data)}"]
                head += [f"{k}: {v}" for k, v in headers.items()]
                with server._lock:
                    server.replies += 1
                try:
                    self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode() + data)
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

        return Handler
