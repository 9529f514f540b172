"""The ``command`` adapter: one long-lived subprocess speaking JSON lines.

Protocol (one JSON object per line, UTF-8, each line flushed by the process):

    ragproof -> process (stdin):
      {"id": "7", "method": "retrieve", "question": "...", "k": 5}
      {"id": "8", "method": "answer", "question": "..."}
    process -> ragproof (stdout):
      {"id": "7", "result": [{"id": "c1", "text": "..."}]}
      {"id": "8", "result": {"text": "...", "citations": ["c1"]}}
      {"id": "8", "error": "what went wrong"}

Requests are sent as soon as cases start, so up to ``adapter.concurrency`` cases are in flight
and replies may come back in any order: they are matched by ``id``. Lines that are not a
reply to a pending request are ignored (noted in the log). The process's stderr is appended
to a log file kept with the run. Its environment is the caller's minus the withheld secrets
(:mod:`gate.boundary.secrets`).

If the process exits, requests in flight fail and are retried (up to ``adapter.retries``) on
a fresh process; after ``MAX_CONSECUTIVE_EXITS`` exits with no reply in between the adapter
stops restarting it and every further case is an adapter error.

The process is started through the active sandbox (:mod:`gate.boundary.sandbox`): its own
session, and in the action's image another user. With ``handshake`` (the python adapter's
worker) the first line the process writes says what it serves, ``{"ready": true, "methods":
[...]}``, or why it cannot, ``{"fatal": "..."}`` (a usage error). ``kill()`` stops the process
at once: requests of other cases in flight then go to a fresh process without using a retry.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from gate.adapters.base import AdapterError, CallAdapter, parse_answer, parse_chunks
from gate.core.errors import UsageError
from gate.model.records import Answer, Chunk

MAX_CONSECUTIVE_EXITS = 5
STOP_GRACE_S = 2.0


class _ProcessGone(Exception):
    """The process handling a request went away before replying (retryable)."""

    def __init__(self, reason: str, *, collateral: bool = False) -> None:
        super().__init__(reason)
        self.collateral = collateral  # stopped on purpose for another request: no retry used


@dataclass
class _Process:
    proc: asyncio.subprocess.Process
    pending: dict[str, asyncio.Future[dict[str, Any]]] = field(default_factory=dict)
    reader: asyncio.Task[None] | None = None
    gone: str | None = None  # why it stopped, once it has
    killed: bool = False  # stopped by kill(), not by itself


class CommandAdapter(CallAdapter):
    def __init__(
        self,
        argv: list[str],
        *,
        cwd: Path,
        environment: dict[str, str],
        log_path: Path,
        retries: int,
        max_line_bytes: int,
        methods: list[str],
        handshake: bool = False,
    ) -> None:
        self._argv = argv
        self._handshake = handshake
        self._cwd = cwd
        self._environment = environment
        self._log_path = log_path
        self._retries = retries
        self._max_line_bytes = max_line_bytes
        self.supports_retrieve = "retrieve" in methods
        self.supports_answer = "answer" in methods
        self._current: _Process | None = None
        self._lock = asyncio.Lock()
        self._ids = itertools.count(1)
        self._exits_without_reply = 0
        self._log: IO[bytes] | None = None
        self.starts = 0  # how many processes were started (for the log and tests)

    # -- process lifecycle -------------------------------------------------------------

    async def start(self) -> None:
        await self._process()

    async def _process(self) -> _Process:
        async with self._lock:
            current = self._current
            if current is not None and current.gone is None:
                return current
            if self._exits_without_reply >= MAX_CONSECUTIVE_EXITS:
                raise AdapterError(
                    f"command exited {self._exits_without_reply} times without replying; not restarting it"
                )
            return await self._spawn()

    async def _spawn(self) -> _Process:
        if self._log is None:
            from gate.boundary.files import open_log

            self._log = open_log(self._log_path)  # kept open for the run
        from gate.boundary.sandbox import active

        sandbox = active()
        try:
            proc = await asyncio.create_subprocess_exec(
                *self._argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=self._log,
                cwd=self._cwd,
                env=self._environment,
                limit=self._max_line_bytes + 1,
                **(sandbox.popen_kwargs() if sandbox is not None else {}),
            )
        except OSError as exc:
            raise UsageError(
                f"adapter.command: cannot start {self._argv[0]!r}: {exc.strerror or exc}"
            ) from None
        if sandbox is not None:
            sandbox.started(proc.pid)
        self.starts += 1
        if self._handshake:
            await self._greeting(proc)
        current = _Process(proc)
        current.reader = asyncio.create_task(self._read_replies(current))
        self._current = current
        return current

    async def _greeting(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        try:
            line = await proc.stdout.readline()
        except ValueError:
            line = b""
        try:
            message = json.loads(line) if line else None
        except (json.JSONDecodeError, UnicodeDecodeError):
            message = None
        # A failure on the first start is the configuration's; on a restart it is this case's.
        error: type[Exception] = UsageError if self.starts == 1 else AdapterError
        if not isinstance(message, dict) or not message.get("ready"):
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
            code = await proc.wait()
            if isinstance(message, dict) and isinstance(message.get("fatal"), str):
                raise error(message["fatal"])
            raise error(
                f"adapter: the pipeline's process exited (code {code}) before it was ready; "
                f"its output is in {self._log_path}"
            )
        methods = message.get("methods") or []
        self.supports_retrieve = "retrieve" in methods
        self.supports_answer = "answer" in methods

    def kill(self) -> None:
        """Stop the current process now; requests in flight go to a fresh one, no retry used.

        Once only: every case in flight that times out (or is interrupted) asks, and a second
        ``Process.kill`` polls the process, which reaps it when it has died meanwhile, before
        asyncio's watcher does (asyncio then logs an unknown child and reports exit code 255).
        """
        current = self._current
        if (
            current is not None
            and current.gone is None
            and not current.killed
            and current.proc.returncode is None
        ):
            current.killed = True
            with contextlib.suppress(ProcessLookupError):
                current.proc.kill()

    def _note(self, text: str) -> None:
        if self._log is not None:
            self._log.write(f"[ragproof] {text}\n".encode())
            self._log.flush()

    async def _read_replies(self, current: _Process) -> None:
        stdout = current.proc.stdout
        assert stdout is not None
        reason = "closed its stdout"
        while True:
            try:
                line = await stdout.readline()
            except ValueError:
                reason = f"wrote a line longer than max_response_bytes={self._max_line_bytes}"
                current.proc.kill()
                break
            if not line:
                break
            self._dispatch(current, line)
        code = await current.proc.wait()
        if current.killed:
            reason = "was stopped (another request timed out)"
        else:
            self._exits_without_reply += 1
        current.gone = f"{reason}; exit code {code}"
        self._note(f"process {current.proc.pid} {current.gone}")
        for future in current.pending.values():
            if not future.done():
                future.set_exception(_ProcessGone(current.gone, collateral=current.killed))
        current.pending.clear()

    def _dispatch(self, current: _Process, line: bytes) -> None:
        try:
            message = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            self._note(f"ignored a stdout line that is not JSON: {line[:200]!r}")
            return
        reply_id = message.get("id") if isinstance(message, dict) else None
        future = current.pending.pop(str(reply_id), None) if reply_id is not None else None
        if future is None:
            self._note(f"ignored a stdout line that answers no pending request: {line[:200]!r}")
            return
        self._exits_without_reply = 0
        if not future.done():
            future.set_result(message)

    async def close(self) -> None:
        current, self._current = self._current, None
        if current is not None and current.gone is None:
            proc = current.proc
            if proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.close()
            try:
                await asyncio.wait_for(proc.wait(), STOP_GRACE_S)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        if current is not None and current.reader is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await current.reader
        if self._log is not None:
            self._log.close()
            self._log = None

    # -- requests ----------------------------------------------------------------------

    async def _request(self, method: str, fields: dict[str, Any]) -> Any:
        failure = ""
        attempts = 0
        while attempts <= self._retries:
            current = await self._process()
            request_id = str(next(self._ids))
            future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
            current.pending[request_id] = future
            line = json.dumps({"id": request_id, "method": method, **fields}, ensure_ascii=False) + "\n"
            try:
                assert current.proc.stdin is not None
                current.proc.stdin.write(line.encode("utf-8"))
                await current.proc.stdin.drain()
                message = await future
            except (_ProcessGone, BrokenPipeError, ConnectionResetError) as exc:
                failure = str(exc) or "its stdin was closed"
                if not (isinstance(exc, _ProcessGone) and exc.collateral):
                    attempts += 1
                continue
            finally:
                current.pending.pop(request_id, None)
            if "error" in message:
                raise AdapterError(self._error_message(method, message["error"]))
            if "result" not in message:
                raise AdapterError(f"{method}: reply has neither 'result' nor 'error'")
            return message["result"]
        tries = f" (after {self._retries} retries)" if self._retries else ""
        raise AdapterError(f"{method}: command {failure}{tries}")

    def _error_message(self, method: str, error: Any) -> str:
        return f"{method}: {error}"

    async def retrieve(self, question: str, k: int) -> list[Chunk]:
        return parse_chunks(await self._request("retrieve", {"question": question, "k": k}))

    async def answer(self, question: str) -> Answer:
        return parse_answer(await self._request("answer", {"question": question}))
