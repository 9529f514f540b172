"""docs/pipelines.md stays true: every config key is in its table, and the README links it after the two commands."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from gate.model.config import Config

ROOT = Path(__file__).resolve().parents[2]


def _keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    keys: list[str] = []
    for name, field in model.model_fields.items():
        if name == "base_dir":  # where the file was loaded from, not a key
            continue
        nested: Any = next(
            (
                a
                for a in (*getattr(field.annotation, "__args__", ()), field.annotation)
                if isinstance(a, type) and issubclass(a, BaseModel)
            ),
            None,
        )
        if nested is not None and name != "metrics":
            keys += _keys(nested, f"{prefix}{name}.")
        else:
            keys.append(prefix + name)
    return keys


def test_every_config_key_is_in_the_table() -> None:
    text = (ROOT / "docs" / "pipelines.md").read_text(encoding="utf-8")
    table = set(re.findall(r"^\| `([a-z_.]+)` \|", text, re.M))
    keys = _keys(Config)
    assert "dataset_version" in keys and "gate.metrics" in keys and "run.document_id_key" in keys
    assert sorted(set(keys) - table) == []
    assert sorted(k for k in table - set(keys) if "." in k or k in {"version", "dataset"}) == []


def test_the_readme_links_the_page_right_after_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    commands_end = readme.index("```\n", readme.index("```bash\n") + 8) + 4
    following = readme[commands_end:].lstrip("\n").split("\n\n")[0]
    assert "[docs/pipelines.md](docs/pipelines.md)" in following
