"""Errors that end a command with a documented exit code and one line on stderr.

Exit codes (docs/running.md, "Exit codes"):
  0  success / gate passed
  1  gate failed, or an unexpected failure
  2  run aborted by the cost budget (results kept)
  3  runs not comparable
  4  run complete, but more cases failed than run.max_failure_rate allows
  64 usage or configuration error
  65 bad input data (dataset, replay file, artifact)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from pydantic import BaseModel

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BUDGET = 2
EXIT_NOT_COMPARABLE = 3
EXIT_FAILURE_RATE = 4
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


def clipped(text: str, limit: int = 60) -> str:
    """``text`` cut to ``limit`` characters, the last one an ellipsis, for a value quoted in a message."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def location(path: object, line: int | None = None, field: str | None = None) -> str:
    """Format ``file:line: field`` for error messages (parts that are None are left out)."""
    out = str(path)
    if line is not None:
        out += f":{line}"
    if field:
        out += f": {field}"
    return out


def pydantic_message(exc: Exception, model: type | None = None) -> str:
    """Condense a pydantic ValidationError to ``field.path: what was expected`` (first error).

    An unknown key gets a hint when ``model`` is given (another tool's name for one of ours,
    or "did you mean" the closest declared key; see :mod:`gate.core.suggest`). The remaining
    error count is appended so nothing is silently hidden.
    """
    items = error_items(exc)
    if not items:
        return str(exc)
    first = items[0]
    loc = ".".join(str(p) for p in first.get("loc", ())) or "(root)"
    msg = f"{loc}: {first.get('msg', 'invalid value')}"
    if first.get("type") == "extra_forbidden":
        msg = f"{loc}: unknown key"
        if model is not None:
            from gate.core.suggest import unknown_key_hint

            hint = unknown_key_hint(model, tuple(first.get("loc", ())))
            if hint:
                msg += f"; {hint}"
    if len(items) > 1:
        msg += f" (and {len(items) - 1} more error{'s' if len(items) > 2 else ''})"
    return msg


def error_items(exc: Exception) -> list[dict[str, Any]]:
    """The error dicts of a pydantic ValidationError, in pydantic's order ([] for other errors)."""
    errors = getattr(exc, "errors", None)
    return list(errors()) if callable(errors) else []


_Model = TypeVar("_Model", bound="BaseModel")


def validated(
    model: type[_Model],
    raw: Any,
    where: str,
    error: type[Exception] = DataError,
    *,
    line_of: Callable[[tuple[str | int, ...]], int | None] | None = None,
) -> _Model:
    """``model.model_validate(raw)``; a failure raises ``error("WHERE: field.path: expected ...")``.

    ``line_of`` maps the failing field's location to a line of the source file (YAML node
    marks): the message then starts ``WHERE:LINE:``.
    """
    from pydantic import ValidationError

    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        items = error_items(exc)
        line = line_of(tuple(items[0].get("loc", ()))) if line_of is not None and items else None
        raise error(f"{location(where, line)}: {pydantic_message(exc, model)}") from None


def json_problem(exc: Exception) -> str:
    """``malformed JSON (what at line L column C)`` for a ``json.JSONDecodeError``.

    A one-line text (a JSONL line) gives its column only: the caller names the line.
    """
    msg, line, column = getattr(exc, "msg", str(exc)), getattr(exc, "lineno", 1), getattr(exc, "colno", 0)
    at = f"at column {column}" if line == 1 else f"at line {line} column {column}"
    return f"malformed JSON ({msg} {at})"


def yaml_problem(path: object, exc: Exception) -> tuple[str, str]:
    """(``file:line``, what the parser found) for a ``yaml.YAMLError``; no line when it has no mark."""
    mark = getattr(exc, "problem_mark", None)
    where = location(path, mark.line + 1 if mark is not None else None)
    return where, getattr(exc, "problem", None) or "invalid YAML"


class BudgetExceeded(RagproofError):
    """RAGPROOF_MAX_COST_USD would be exceeded by the next judge call: the run stops gracefully."""

    exit_code = EXIT_BUDGET


class JudgeError(Exception):
    """A judge call that produced no usable verdict (transport failure or two invalid replies).

    Not a command-ending error: the metric that asked is marked ``judge_error`` for the case,
    with ``str(err)`` as the reason and ``judge`` (raw replies, call count) kept in the row.
    """

    def __init__(self, message: str, judge: dict[str, Any] | None = None) -> None:
        super().__init__(" ".join(message.split()))
        self.judge = judge or {}
