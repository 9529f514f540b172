"""The process environment, read once by the entry point and passed down.

Nothing below the command layer reads ``os.environ``: it receives an ``Environment``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType


@dataclass(frozen=True)
class Environment:
    """A frozen snapshot of the variables and terminal state a command may depend on."""

    variables: Mapping[str, str] = field(default_factory=dict)
    cwd: Path = field(default_factory=Path.cwd)
    stderr_is_tty: bool = False

    @classmethod
    def from_process(cls) -> Environment:
        return cls(
            variables=MappingProxyType(dict(os.environ)),
            cwd=Path.cwd(),
            stderr_is_tty=sys.stderr.isatty(),
        )

    def get(self, name: str, default: str | None = None) -> str | None:
        return self.variables.get(name, default)

    @property
    def is_ci(self) -> bool:
        return (
            self.variables.get("CI", "").lower() in {"1", "true", "yes"} or "GITHUB_ACTIONS" in self.variables
        )
