"""Which environment variables the pipeline under test must never see.

Code from a pull request is untrusted: the GitHub token, the Actions runtime tokens, the
action's inputs (which may carry a token) and the judge's key and settings are withheld from
the pipeline's process and from the headers the http adapter sends. So are the runner's
file-command variables (``GITHUB_ENV``, ``GITHUB_OUTPUT``, ...): a pipeline that appends to
them could set the next steps' environment, outputs or PATH. A name listed in
``adapter.env_passthrough`` is let through on purpose (never a file-command variable).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType

from gate.core.environment import Environment

# Variables that hold credentials of the job; none of them may reach the pipeline under test.
SECRET_VARIABLES = (
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "INPUT_GITHUB-TOKEN",
    "ACTIONS_RUNTIME_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_URL",
)
SECRET_NAMES: frozenset[str] = frozenset({"GITHUB_TOKEN", "GH_TOKEN"})
SECRET_PREFIXES: tuple[str, ...] = ("ACTIONS_", "INPUT_", "RAGPROOF_JUDGE_")
FILE_COMMAND_VARIABLES: frozenset[str] = frozenset(
    {"GITHUB_ENV", "GITHUB_OUTPUT", "GITHUB_PATH", "GITHUB_STATE", "GITHUB_STEP_SUMMARY"}
)


def is_withheld(name: str, judge_key_env: str | None) -> bool:
    """True when ``name`` is a variable the pipeline must not receive by default."""
    upper = name.upper()
    if upper in SECRET_NAMES or upper in FILE_COMMAND_VARIABLES or upper.startswith(SECRET_PREFIXES):
        return True
    return judge_key_env is not None and name == judge_key_env


def pipeline_environment(
    variables: Mapping[str, str], judge_key_env: str | None, passthrough: Iterable[str] = ()
) -> dict[str, str]:
    """``variables`` without the withheld names, except those in ``passthrough``."""
    allowed = set(passthrough) - FILE_COMMAND_VARIABLES
    return {
        name: value
        for name, value in variables.items()
        if name in allowed or not is_withheld(name, judge_key_env)
    }


def runner_environment(env: Environment, cwd: Path, head_sha: str | None = None) -> Environment:
    """The Environment handed to the runner: no GitHub/Actions credentials, no inputs.

    On a pull request ``GITHUB_SHA`` is GitHub's merge commit, while the workflows check out
    and run the head commit: ``head_sha`` replaces it so run.json records what really ran.
    """
    kept = {
        name: value
        for name, value in env.variables.items()
        if name not in SECRET_VARIABLES and not name.startswith("INPUT_")
    }
    if head_sha:
        kept["GITHUB_SHA"] = head_sha
    return Environment(variables=MappingProxyType(kept), cwd=cwd, stderr_is_tty=env.stderr_is_tty)
