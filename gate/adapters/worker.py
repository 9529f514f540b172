"""``python -m gate.adapters.worker ADAPTER_JSON K DIR...``: a python-adapter pipeline in its own process.

The worker builds the pipeline (:func:`gate.adapters.python.make_pipeline`: a python target, or
a framework adapter's pipeline over its target; with the DIRs at the front of ``sys.path``), then speaks the command adapter's protocol on stdin/stdout:

- first line out: ``{"ready": true, "methods": ["retrieve", "answer"]}`` (the methods the object
  has), or ``{"fatal": "adapter.target: ..."}`` and exit code 3 when it cannot be loaded;
- then one reply per request line, ``{"id", "result"}`` or ``{"id", "error"}``, in any order.
  Results are validated and converted here (:func:`gate.adapters.base.parse_chunks` /
  ``parse_answer``: framework objects, our models), so only plain JSON crosses the pipe; the
  adapter validates it again, as it would any command pipeline's reply.

Before the pipeline is imported, file descriptor 1 is pointed at stderr and the protocol keeps a
private copy of the original stdout: whatever the pipeline prints (``print``, a C library, a
subprocess it starts) lands in the adapter's stderr log and cannot forge a reply.
Plain methods run on a daemon thread per call, ``async`` ones on the event loop; the worker
exits when its stdin closes.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import sys
from pathlib import Path
from typing import Any, BinaryIO

EXIT_FATAL = 3


def _protocol_stream() -> BinaryIO:
    """A private copy of stdout for the protocol; fd 1 (and sys.stdout) then go to stderr."""
    fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(fd, "wb", buffering=0)


def _send(out: BinaryIO, message: dict[str, Any]) -> None:
    try:
        line = json.dumps(message, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        line = json.dumps({"id": message.get("id"), "error": f"result is not JSON: {exc}"})
    out.write(line.encode("utf-8") + b"\n")


async def _call(pipeline: Any, request: dict[str, Any]) -> dict[str, Any]:
    from gate.adapters.base import AdapterError, parse_answer, parse_chunks
    from gate.adapters.python import run_on_daemon_thread

    method_name = request.get("method")
    method = getattr(pipeline, str(method_name), None) if method_name in ("retrieve", "answer") else None
    if not callable(method):
        return {"id": request.get("id"), "error": f"the pipeline has no {method_name!r} method"}
    args: tuple[Any, ...] = (request.get("question", ""),)
    if method_name == "retrieve":
        args += (request.get("k", 5),)
    try:
        if inspect.iscoroutinefunction(method):
            result = await method(*args)
        else:
            result = await run_on_daemon_thread(method, *args)
            if inspect.isawaitable(result):
                result = await result
    except Exception as exc:
        name = getattr(method, "__name__", method_name)
        return {"id": request.get("id"), "error": f"{name} raised {type(exc).__name__}: {exc}"}
    # Validated here, where the objects are (framework types, our models): what crosses the
    # pipe is plain JSON, and a wrong shape is reported as the in-process boundary would.
    try:
        if method_name == "retrieve":
            plain: Any = [chunk.model_dump(mode="json") for chunk in parse_chunks(result)]
        else:
            plain = parse_answer(result).model_dump(mode="json")
    except AdapterError as exc:
        return {"id": request.get("id"), "error": str(exc)}
    return {"id": request.get("id"), "result": plain}


async def _serve(pipeline: Any, out: BinaryIO) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=2**26)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    tasks: set[asyncio.Task[None]] = set()

    async def handle(request: dict[str, Any]) -> None:
        _send(out, await _call(pipeline, request))

    while line := await reader.readline():
        try:
            request = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        if isinstance(request, dict):
            task = asyncio.create_task(handle(request))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
    if tasks:
        await asyncio.gather(*tasks, return_exceptions=True)


def main(argv: list[str]) -> int:
    out = _protocol_stream()
    from gate.adapters.python import make_pipeline
    from gate.core.errors import RagproofError
    from gate.model.config import AdapterConfig

    try:
        adapter = AdapterConfig.model_validate_json(argv[0])
        pipeline = make_pipeline(adapter, [Path(d) for d in argv[2:]], int(argv[1]))
    except RagproofError as exc:
        _send(out, {"fatal": str(exc)})
        return EXIT_FATAL
    methods = [m for m in ("retrieve", "answer") if callable(getattr(pipeline, m, None))]
    _send(out, {"ready": True, "methods": methods})
    asyncio.run(_serve(pipeline, out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
