"""The ``python`` adapter: a pipeline object named ``module:attr``, run in a worker process.

``attr`` may be an object with ``retrieve``/``answer`` methods, a class (instantiated without
arguments) or a zero-argument factory (called once). Methods may be plain or ``async def``.
The module is imported with the config file's directory and then the working directory at
the front of ``sys.path``, so ``pipeline:make`` next to ``ragproof.yaml`` just works.

The pipeline is code under test, often from a pull request: it never runs inside ragproof's
own process (which may hold the judge key or the job's token). :class:`PythonWorkerAdapter`
starts ``python -m gate.adapters.worker``, which imports the target and speaks the command
adapter's JSON-lines protocol (:mod:`gate.adapters.command`); it is started like a command
pipeline (scrubbed environment, the active sandbox's user and session). In the worker, plain
methods run on a daemon thread per call and ``async`` ones on its event loop; what the
pipeline prints goes to the adapter's stderr log, never into the protocol.

A call that overruns the per-case timeout is really stopped: the worker is killed, calls of
other cases in flight are sent again to a fresh worker (without using a retry), and the next
case imports the pipeline anew.
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

from gate.adapters.command import CommandAdapter
from gate.core.errors import UsageError
from gate.model.config import AdapterConfig
from gate.model.dataset import Case
from gate.model.records import CaseOutput


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
            # the config's directory and the working directory are often the same: name it once
            dirs = ", ".join(dict.fromkeys(str(d.resolve()) for d in search_dirs))
            hint = ""
            if module_name.endswith(".py"):  # a file name where a module name belongs
                suggested = module_name[: -len(".py")].replace("/", ".")
                hint = f"; did you mean {suggested}:{attr_path}?"
            raise UsageError(
                f"adapter.target: module {module_name!r} not found (searched {dirs}){hint}"
            ) from None
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
        framework = FRAMEWORK_MODULES.get(type(obj).__module__.split(".")[0])
        raise UsageError(
            f"adapter.target: {target!r} ({type(obj).__name__}) has neither a retrieve(question, k) nor "
            "an answer(question) method"
            + (f" ({', '.join(seen)}, not callable)" if seen else "")
            + (f"; it is a {framework[0]} object: use adapter.type: {framework[1]}" if framework else "")
        )
    return obj


# top-level module of a framework object's class -> (its name, the adapter type that reads it)
FRAMEWORK_MODULES = {
    "haystack": ("Haystack", "haystack"),
    "langchain_core": ("LangChain", "langchain"),
    "langchain": ("LangChain", "langchain"),
    "langchain_community": ("LangChain", "langchain"),
    "llama_index": ("LlamaIndex", "llamaindex"),
}


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


def make_pipeline(adapter: AdapterConfig, search_dirs: list[Path], k: int) -> Any:
    """The pipeline object an adapter config names: the one place that builds it (in the worker).

    ``python``: :func:`load_pipeline`; a framework type (langchain, llamaindex, haystack): its
    thin pipeline over the imported object (:func:`gate.adapters.frameworks.framework_pipeline`,
    which needs the run's ``k``).
    """
    assert adapter.target is not None
    if adapter.type == "python":
        return load_pipeline(adapter.target, search_dirs)
    from gate.adapters.frameworks import framework_pipeline

    return framework_pipeline(adapter.type, load_framework_object(adapter.target, search_dirs), adapter, k)


def worker_environment(environment: dict[str, str]) -> dict[str, str]:
    """``environment`` so that the worker imports this very ``gate``.

    An installed ragproof is found by the interpreter itself; one imported from a source tree
    (``PYTHONPATH``, the working directory) is appended to ``PYTHONPATH``. Site-packages are
    never added: they would shadow the pipeline's own versions of shared dependencies.
    """
    import gate

    root = str(Path(gate.__file__).resolve().parent.parent)
    if Path(root).name in ("site-packages", "dist-packages"):
        return environment
    entries = [e for e in environment.get("PYTHONPATH", "").split(":") if e]
    if root not in entries:
        entries.append(root)
    return {**environment, "PYTHONPATH": ":".join(entries)}


def worker_argv(python: str, adapter: AdapterConfig, search_dirs: list[Path], k: int) -> list[str]:
    """The worker's command line: the adapter config as JSON, the run's k, the import directories."""
    argv = [python, "-m", "gate.adapters.worker", adapter.model_dump_json(), str(k)]
    return argv + [str(d.resolve()) for d in search_dirs]


class PythonWorkerAdapter(CommandAdapter):
    """The python adapter: the pipeline in ``python -m gate.adapters.worker``."""

    def __init__(self, argv: list[str], *, environment: dict[str, str], **kwargs: Any) -> None:
        super().__init__(
            argv,
            handshake=True,
            methods=["retrieve", "answer"],
            environment=worker_environment(environment),
            **kwargs,
        )

    def _error_message(self, method: str, error: Any) -> str:
        # The worker already says which method raised what.
        return str(error)

    async def run_case(self, case: Case, k: int) -> CaseOutput:
        try:
            return await super().run_case(case, k)
        except asyncio.CancelledError:
            # The case timed out (or the run was interrupted): stop the call for real.
            self.kill()
            raise


__all__ = ["PythonWorkerAdapter", "load_pipeline", "make_pipeline", "worker_argv"]
