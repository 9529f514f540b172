"""The framework packages of the test extra, imported with an install hint when one is missing."""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest

INSTALL = "pip install -e '.[test]'"


def require(module: str) -> ModuleType:
    """``import module``, or fail the test naming the command that installs it."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        pytest.fail(f"{module} is not installed ({exc.name} missing): {INSTALL}")
