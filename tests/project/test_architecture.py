"""The layout keeps data flowing one way: no module imports from a stage after its own.

The stages and what each may import are documented in docs/architecture.md; this test holds
the code to it, lazy (function-level) imports included.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

GATE = Path(__file__).resolve().parents[2] / "gate"

# Stage of each top-level part of gate/: a module may import gate modules of its own stage or
# an earlier one. The root package (gate/__init__.py: the version) is foundation.
STAGES: dict[str, int] = {
    "__init__": 0,
    "core": 0,
    "stats": 0,
    "boundary": 1,
    "model": 2,
    "adapters": 3,
    "judge": 4,
    "metrics": 5,
    "run": 6,
    "decision": 7,
    "report": 8,
    "github": 9,
    "commands": 10,
    "cli": 11,
    "__main__": 11,
}


def _part(module: str) -> str:
    """``gate.run.runner`` -> ``run``; ``gate`` -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _module_name(path: Path, root: Path = GATE) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def _gate_imports(path: Path, root: Path = GATE) -> list[tuple[int, str]]:
    """(line, imported gate module) for every import in ``path``, lazy ones included."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    name = _module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "gate"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module.split(".")[0] != "gate":
                continue
            if module == "gate":
                # ``from gate import X``: X may be a sub-package or a name of gate/__init__.py.
                found += [(node.lineno, f"gate.{a.name}" if a.name in STAGES else "gate") for a in node.names]
            else:
                found.append((node.lineno, module))
    return found


SOURCES = sorted(p for p in GATE.rglob("*.py") if "__pycache__" not in p.parts)


def test_every_part_of_gate_has_a_stage() -> None:
    parts = {p.stem if p.parent == GATE else p.relative_to(GATE).parts[0] for p in SOURCES}
    assert parts - set(STAGES) == set(), "place new packages in STAGES and docs/architecture.md"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(GATE.parent)))
def test_no_import_reaches_a_later_stage(path: Path) -> None:
    own = STAGES[_part(_module_name(path))]
    upstream = [
        f"{path.relative_to(GATE.parent)}:{line} imports {module} (stage {STAGES[_part(module)]} > {own})"
        for line, module in _gate_imports(path)
        if STAGES.get(_part(module), 99) > own
    ]
    assert upstream == []


def test_the_checker_sees_upstream_imports(tmp_path: Path) -> None:
    # The rule must be able to fail: lazy and relative imports of later stages are found.
    fake = tmp_path / "gate" / "model" / "x.py"
    fake.parent.mkdir(parents=True)
    fake.write_text(
        "def f():\n    from gate.run.runner import execute_run\n    from ..decision import compare\n"
    )
    found = _gate_imports(fake, tmp_path / "gate")
    assert found == [(2, "gate.run.runner"), (3, "gate.decision")]
    assert all(STAGES[_part(m)] > STAGES["model"] for _, m in found)


def test_docs_name_every_stage() -> None:
    text = (GATE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    for part in STAGES:
        if part.startswith("__"):
            continue
        name = f"gate/{part}.py" if (GATE / f"{part}.py").is_file() else f"gate/{part}/"
        assert f"`{name}`" in text, f"docs/architecture.md does not describe {name}"


def test_docs_name_every_module() -> None:
    # Each module of a package appears as `package/module.py` (commands: by file name).
    text = (GATE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    missing = [
        str(path.relative_to(GATE))
        for path in SOURCES
        if path.parent != GATE
        and path.name != "__init__.py"
        and f"`{path.relative_to(GATE).as_posix()}`" not in text
        and f"`{path.name}`" not in text
    ]
    assert missing == [], f"docs/architecture.md does not describe {missing}"
