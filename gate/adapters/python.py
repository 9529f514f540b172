"""The ``python`` adapter: a pipeline object in this process, named ``module:attr``.

``attr`` may be an object with ``retrieve``/``answer`` methods, a class (instantiated without
arguments) or a zero-argument factory (called once). Methods may be plain or ``async def``.
The module is imported with the config file's directory and then the working directory at
the front of ``sys.path``, so ``pipeline:make`` next to ``ragproof.yaml`` just works.

Plain methods run on their own daemon thread per call (the runner bounds how many are in
flight). A plain call that overruns the per-case timeout is recorded as a timeout, but Python
cannot stop the thread: it finishes in the background and its result is discarded; being a
daemon thread, it never keeps ragproof from exiting (a pool's worker threads would be joined
at exit, so one hung call could hold a CI job until its own timeout).

The pipeline runs inside ragproof's own process and can read everything the process can;
run untrusted pipeline code with the ``command`` adapter, whose environment is scrubbed.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gate.adapters.base import AdapterError, CallAdapter, parse_answer, parse_chunks
from gate.core.errors import UsageError
from gate.model.records import Answer, Chunk


def _import_target(target: str, search_dirs: list[Path]) -> Any:
    module_name, sep, attr_path = target.partition(":")
    if not sep or not module_name or not attr_path:
        raise UsageError(f"adapter.target: expected 'module:attr', got {target!r}")
    for directory in reversed(search_dirs):
        entry = str(directory.resolve())
        if entry in sys.path:
            sys.path.remove(entry)
        sys.path.insert(0, entry)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            dirs = ", ".join(str(d) for d in search_dirs)
            raise UsageError(f"adapter.target: module {module_name!r} not found (searched {dirs})") from None
        raise UsageError(f"adapter.target: importing {module_name!r} failed: {exc}") from None
    except Exception as exc:
        raise UsageError(
            f"adapter.target: importing {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from None
    obj: Any = module
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UsageError(f"adapter.target: {module_name!r} has no attribute {attr_path!r}") from None
    return obj


def _has_pipeline_methods(obj: Any) -> bool:
    return callable(getattr(obj, "retrieve", None)) or callable(getattr(obj, "answer", None))


def _instantiate(obj: Any, target: str) -> Any:
    try:
        return obj()
    except Exception as exc:
        raise UsageError(f"adapter.target: calling {target!r} failed: {type(exc).__name__}: {exc}") from None


def load_framework_object(target: str, search_dirs: list[Path]) -> Any:
    """Import ``target`` for a framework adapter: the object, or what a class or function returns."""
    obj = _import_target(target, search_dirs)
    # Framework objects may themselves be callable; only classes and plain functions are factories.
    return _instantiate(obj, target) if inspect.isclass(obj) or inspect.isfunction(obj) else obj


def load_pipeline(target: str, search_dirs: list[Path]) -> Any:
    """Import ``target`` and return the pipeline object (instantiating a class or factory)."""
    obj = _import_target(target, search_dirs)
    if inspect.isclass(obj) or (callable(obj) and not _has_pipeline_methods(obj)):
        obj = _instantiate(obj, target)
    if not _has_pipeline_methods(obj):
        seen = [f"{name} is a {type(getattr(obj, name)).__name__}" for name in METHODS if hasattr(obj, name)]
        raise UsageError(
            f"adapter.target: {target!r} ({type(obj).__name__}) has neither a retrieve(question, k) nor "
            "an answer(question) method" + (f" ({', '.join(seen)}, not callable)" if seen else "")
        )
    return obj


# The pipeline's methods and the arguments the adapter calls them with.
METHODS: dict[str, tuple[str, ...]] = {"retrieve": ("question", "k"), "answer": ("question",)}
NOT_EXPOSED = {
    "retrieve": "retrieval metrics will be skipped",
    "answer": "answer, generation and robustness metrics will be skipped",
}


def check_pipeline_methods(pipeline: Any) -> tuple[list[str], list[str]]:
    """(problems, notes) about ``pipeline``'s ``retrieve``/``answer``, without calling them.

    A problem makes every call fail: a method that is not callable, or whose signature cannot
    take the adapter's arguments (``retrieve(question, k)``, ``answer(question)``). A note says
    which method is absent (a retrieval-only or answer-only pipeline is allowed) and what that
    skips. Objects whose signature Python cannot read (some builtins) are given the benefit.
    """
    problems: list[str] = []
    notes: list[str] = []
    for name, params in METHODS.items():
        if not hasattr(pipeline, name):
            notes.append(f"no {name}({', '.join(params)}) method: {NOT_EXPOSED[name]}")
            continue
        method = getattr(pipeline, name)
        if not callable(method):
            problems.append(f"{name} is a {type(method).__name__}, not a method")
            continue
        try:
            signature = inspect.signature(method)
        except (TypeError, ValueError):
            continue
        try:
            signature.bind(*(f"<{p}>" for p in params))
        except TypeError:
            problems.append(f"{name}{signature} cannot be called as {name}({', '.join(params)})")
    return problems, notes


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():  # cancelled meanwhile (timeout, interruption)
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def run_on_daemon_thread(method: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
    """A future for ``method(*args)`` running on a new daemon thread."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def target() -> None:
        result, error = None, None
        try:
            result = method(*args)
        except BaseException as exc:  # handed to the awaiting coroutine
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting
            loop.call_soon_threadsafe(_settle, future, result, error)

    threading.Thread(target=target, name="pipeline", daemon=True).start()
    return future


class PythonAdapter(CallAdapter):
    def __init__(self, pipeline: Any) -> None:
        self._retrieve: Callable[..., Any] | None = getattr(pipeline, "retrieve", None)
        self._answer: Callable[..., Any] | None = getattr(pipeline, "answer", None)
        self.supports_retrieve = callable(self._retrieve)
        self.supports_answer = callable(self._answer)

    async def _call(self, method: Callable[..., Any], *args: Any) -> Any:
        try:
            if inspect.iscoroutinefunction(method):
                result = await method(*args)
            else:
                result = await run_on_daemon_thread(method, *args)
                if inspect.isawaitable(result):
                    result = await result
        except AdapterError:
            raise
        except Exception as exc:
            raise AdapterError(f"{method.__name__} raised {type(exc).__name__}: {exc}") from None
        return result

    async def retrieve(self, question: str, k: int) -> list[Chunk]:
        assert self._retrieve is not None
        return parse_chunks(await self._call(self._retrieve, question, k))

    async def answer(self, question: str) -> Answer:
        assert self._answer is not None
        return parse_answer(await self._call(self._answer, question))
