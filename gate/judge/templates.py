"""Judge prompt templates (``gate/judge/prompts/*.j2``): loading, hashing and rendering.

Every template's sha256 (of its source bytes) is recorded in ``run.json`` so that ``compare``
can refuse runs judged with different prompts. A task's cache key uses :meth:`task_sha256`,
which also covers the shared system and repair templates, so editing any of them
invalidates the cached verdicts it influenced.

Untrusted text (question, answer, expected answer, chunk ids and texts) is neutralised before
rendering: ``<<<`` and ``>>>`` become ``‹‹‹`` and ``›››``, so the block delimiters
``<<<BEGIN NAME>>>`` / ``<<<END NAME>>>`` can only come from the template itself.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

PROMPTS_DIR = Path(__file__).parent / "prompts"
SYSTEM_TEMPLATE = "system"
REPAIR_TEMPLATE = "repair"


def neutralise(value: Any) -> Any:
    """``value`` with every ``<<<``/``>>>`` in its strings replaced (recursively through lists and dicts)."""
    if isinstance(value, str):
        return value.replace("<<<", "‹‹‹").replace(">>>", "›››")
    if isinstance(value, dict):
        return {neutralise(k): neutralise(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [neutralise(v) for v in value]
    return value


class PromptSet:
    """The templates of one prompts directory, with their hashes."""

    def __init__(self, directory: Path = PROMPTS_DIR) -> None:
        self.directory = directory
        import jinja2  # loaded with the first prompt set, not by the metric registry

        self._env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(directory)),
            undefined=jinja2.StrictUndefined,
            autoescape=False,
            keep_trailing_newline=False,
        )
        self.hashes: dict[str, str] = {
            path.stem: hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(directory.glob("*.j2"))
        }

    def task_sha256(self, task: str) -> str:
        """sha256 over the hashes of the system, repair and task templates (the cache's prompt key)."""
        parts = [self.hashes[SYSTEM_TEMPLATE], self.hashes[REPAIR_TEMPLATE], self.hashes[task]]
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()

    def render(self, name: str, **inputs: Any) -> str:
        """Render template ``name`` with its untrusted inputs neutralised."""
        template = self._env.get_template(f"{name}.j2")
        return template.render(**neutralise(inputs)).strip() + "\n"
