"""Adapters: how a pipeline is called (``python``, ``http``, ``command``, ``replay``).

:func:`build_adapter` turns ``config.adapter`` into an :class:`~gate.adapters.base.Adapter`.
Configuration problems (a missing header variable) raise UsageError here; a python target that
does not import raises it from ``Adapter.start()``, before any case runs.
"""

from __future__ import annotations

import re
import shutil
import sys
from importlib.machinery import PathFinder
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from gate import requirement
from gate.adapters.base import Adapter, AdapterError, AdapterTimeout
from gate.boundary.sandbox import active, untrusted_environment
from gate.boundary.secrets import is_withheld
from gate.core.environment import Environment
from gate.core.errors import UsageError
from gate.core.network import NetworkSettings
from gate.model.config import Config

STDERR_LOG_NAME = "adapter-stderr.log"


def http_headers(config: Config, env: Environment) -> dict[str, str]:
    """Static headers plus those whose values come from environment variables."""
    adapter = config.adapter
    headers = dict(adapter.headers)
    for header, variable in adapter.headers_from_env.items():
        if is_withheld(variable, config.judge.api_key_env) and variable not in adapter.env_passthrough:
            raise UsageError(
                f"adapter.headers_from_env.{header}: {variable} is withheld from the pipeline; "
                "list it in adapter.env_passthrough to send it anyway"
            )
        value = env.get(variable)
        if value is None:
            raise UsageError(f"adapter.headers_from_env.{header}: environment variable {variable} is not set")
        headers[header] = value
    for name, value in headers.items():
        if any(ch in name + value for ch in "\r\n\0") or not name.strip():
            source = "headers_from_env" if name in adapter.headers_from_env else "headers"
            raise UsageError(f"adapter.{source}.{name}: header values cannot contain line breaks")
    return headers


def _process_options(config: Config, env: Environment, log_dir: Path) -> dict[str, Any]:
    """What the command adapter and the python worker share: environment, log, limits."""
    adapter = config.adapter
    return {
        "cwd": env.cwd,
        "environment": untrusted_environment(
            env.variables, config.judge.api_key_env, adapter.env_passthrough
        ),
        "log_path": log_dir / STDERR_LOG_NAME,
        "retries": adapter.retries,
        "max_line_bytes": adapter.max_response_bytes,
    }


def build_adapter(config: Config, env: Environment, log_dir: Path) -> Adapter:
    """The adapter for ``config.adapter``; a pipeline process's stderr goes to ``log_dir``.

    python and command pipelines run in processes of their own, started through the active
    sandbox (:mod:`gate.boundary.sandbox`); a python target is imported there, not here.
    """
    adapter = config.adapter
    if adapter.type == "python" or adapter.type in FRAMEWORK_PACKAGES:
        from gate.adapters.python import PythonWorkerAdapter, worker_argv

        # Framework adapters are python pipelines too: the worker builds the same object.
        sandbox = active()
        python = sandbox.python() if sandbox is not None else sys.executable
        return PythonWorkerAdapter(
            worker_argv(python, adapter, [config.base_dir, env.cwd], config.run.k),
            **_process_options(config, env, log_dir),
        )
    if adapter.type == "http":
        from gate.adapters.http import HttpAdapter

        return HttpAdapter(
            adapter, http_headers(config, env), NetworkSettings.from_variables(env.variables).ca_bundle
        )
    if adapter.type == "command":
        from gate.adapters.command import CommandAdapter

        assert adapter.command is not None
        return CommandAdapter(
            list(adapter.command), methods=list(adapter.methods), **_process_options(config, env, log_dir)
        )
    from gate.adapters.replay import ReplayAdapter, load_replay

    assert adapter.path is not None
    return ReplayAdapter(load_replay(config.resolve(adapter.path)))


# framework adapter type -> the top-level package its extra installs
FRAMEWORK_PACKAGES = {"langchain": "langchain_core", "llamaindex": "llama_index", "haystack": "haystack"}

_TARGET = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


def check_adapter(config: Config, env: Environment, case_ids: list[str]) -> list[str]:
    """Check ``config.adapter`` without calling the pipeline or importing its code.

    Raises UsageError/DataError for what would make a run fail; returns warnings (a replay
    file that misses cases or records unknown ones).
    """
    adapter = config.adapter
    warnings: list[str] = []
    if adapter.type in FRAMEWORK_PACKAGES:
        package = FRAMEWORK_PACKAGES[adapter.type]
        if PathFinder.find_spec(package, sys.path) is None:
            raise UsageError(
                f"adapter.type {adapter.type}: {package} is not installed "
                f"(pip install '{requirement(adapter.type)}')"
            )
    if adapter.type in ("python", *FRAMEWORK_PACKAGES):
        assert adapter.target is not None
        if not _TARGET.match(adapter.target):
            raise UsageError(f"adapter.target: expected 'module:attr', got {adapter.target!r}")
        # Locate the top-level module without importing it (importing would run its code).
        top = adapter.target.split(":")[0].split(".")[0]
        search = [str(config.base_dir.resolve()), str(env.cwd.resolve()), *sys.path]
        if top not in sys.builtin_module_names and PathFinder.find_spec(top, search) is None:
            raise UsageError(
                f"adapter.target: module {top!r} not found next to the config or in the working directory"
            )
    elif adapter.type == "http":
        parts = urlsplit(adapter.url or "")
        if parts.scheme not in {"http", "https"} or not parts.hostname:
            raise UsageError(f"adapter.url: expected an http:// or https:// URL, got {adapter.url!r}")
        http_headers(config, env)
    elif adapter.type == "command":
        assert adapter.command is not None
        program = adapter.command[0]
        found = shutil.which(program, path=env.get("PATH")) if "/" not in program else program
        if found is None or not (env.cwd / found).exists():
            raise UsageError(f"adapter.command: program {program!r} not found")
    else:
        from gate.adapters.replay import load_replay

        assert adapter.path is not None
        recorded = load_replay(config.resolve(adapter.path))
        missing = [cid for cid in case_ids if cid not in recorded]
        unknown = set(recorded) - set(case_ids)
        if missing:
            warnings.append(
                f"{adapter.path}: no recorded output for {len(missing)} case(s), e.g. {missing[0]!r}"
            )
        if unknown:
            warnings.append(
                f"{adapter.path}: {len(unknown)} recorded id(s) not in the dataset, e.g. {min(unknown)!r}"
            )
    return warnings


__all__ = ["Adapter", "AdapterError", "AdapterTimeout", "build_adapter", "check_adapter", "http_headers"]
