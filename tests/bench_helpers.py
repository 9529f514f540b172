"""Scripts as modules: the benchmarks under bench/ (for tests that run a reduced grid of them)
and other files that are not in a package."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parent.parent / "bench"


def load_file(name: str, path: Path) -> ModuleType:
    """The Python file ``path`` imported as the module ``name`` (a script, not in a package)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


def load_bench(name: str) -> ModuleType:
    """``bench/NAME.py`` imported as ``bench_NAME`` (bench/ is scripts, not a package)."""
    return load_file(f"bench_{name}", BENCH / f"{name}.py")
