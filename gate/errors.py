"""Errors that end a command with a documented exit code and one line on stderr.

Exit codes (see README "Exit codes"):
  0  success / gate passed
  1  gate failed, or an unexpected failure
  2  run aborted by the cost budget (results kept)
  3  runs not comparable
  64 usage or configuration error
  65 bad input data (dataset, replay file, artifact)
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BUDGET = 2
EXIT_NOT_COMPARABLE = 3
EXIT_USAGE = 64
EXIT_DATA = 65


class RagproofError(Exception):
    """Base class: ``str(err)`` is the single line printed on stderr."""

    exit_code: int = EXIT_FAILED

    def __init__(self, message: str) -> None:
        # One line, always: a multi-line message would break CI annotations.
        super().__init__(" ".join(message.split()))


class UsageError(RagproofError):
    """Bad command line or bad configuration file."""

    exit_code = EXIT_USAGE


class DataError(RagproofError):
    """Bad dataset, replay file, artifact or other input data."""

    exit_code = EXIT_DATA


class NotComparableError(RagproofError):
    """Two runs that cannot be compared (different k, judge, ...)."""

    exit_code = EXIT_NOT_COMPARABLE


def location(path: object, line: int | None = None, field: str | None = None) -> str:
    """Format ``file:line: field`` for error messages (parts that are None are left out)."""
    out = str(path)
    if line is not None:
        out += f":{line}"
    if field:
        out += f": {field}"
    return out


def pydantic_message(exc: Exception) -> str:
    """Condense a pydantic ValidationError to ``field.path: what was expected`` (first error).

    The remaining error count is appended so nothing is silently hidden.
    """
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return str(exc)
    items = errors()
    if not items:
        return str(exc)
    first = items[0]
    loc = ".".join(str(p) for p in first.get("loc", ())) or "(root)"
    msg = f"{loc}: {first.get('msg', 'invalid value')}"
    if first.get("type") == "extra_forbidden":
        msg = f"{loc}: unknown key"
    if len(items) > 1:
        msg += f" (and {len(items) - 1} more error{'s' if len(items) > 2 else ''})"
    return msg


class BudgetExceeded(RagproofError):
    """RAGPROOF_MAX_COST_USD would be exceeded by the next judge call: the run stops gracefully."""

    exit_code = EXIT_BUDGET


class JudgeError(Exception):
    """A judge call that produced no usable verdict (transport failure or two invalid replies).

    Not a command-ending error: the metric that asked is marked ``judge_error`` for the case,
    with ``str(err)`` as the reason and ``judge`` (raw replies, call count) kept in the row.
    """

    def __init__(self, message: str, judge: dict | None = None) -> None:
        super().__init__(" ".join(message.split()))
        self.judge = judge or {}
