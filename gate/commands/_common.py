"""Helpers shared by the run, merge, report and validate commands."""

from __future__ import annotations

import argparse
from pathlib import Path

from gate.core.environment import Environment
from gate.model.config import Config, load_config


def add_config_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-c", "--config", default="ragproof.yaml", metavar="FILE", help="ragproof.yaml (default: %(default)s)"
    )


def known_metric_names() -> list[str]:
    """Every name a config may use for a metric: the registry's and the adapter-failure gate's."""
    from gate.metrics import registry
    from gate.model.artifact import FAILURE_RATE_METRIC

    return [*registry(), FAILURE_RATE_METRIC]


def load_checked_config(path: Path, env: Environment) -> Config:
    """``load_config`` with RAGPROOF_* overrides and every metric name checked against the registry."""
    return load_config(path, env.variables, metric_names=known_metric_names())


def load_config_from_args(args: argparse.Namespace, env: Environment) -> Config:
    """The config named by ``-c``, relative to the working directory (see :func:`load_checked_config`)."""
    return load_checked_config(resolve(env, args.config), env)


def resolve(env: Environment, path: str | Path) -> Path:
    """A command-line path, relative to the working directory."""
    p = Path(path)
    return p if p.is_absolute() else env.cwd / p


def positive_int(text: str) -> int:
    """argparse type: a whole number >= 1 (else a one-line usage error naming the argument)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def count(n: int, noun: str) -> str:
    """``3 cases``, ``1 case``."""
    return f"{n} {noun}" + ("" if n == 1 else "s")


def printable(text: str) -> str:
    """``text`` with every non-printable character as ``?``: artifacts may come from a pull
    request, and no terminal escape sequence of theirs reaches the screen."""
    return "".join(ch if ch.isprintable() else "?" for ch in text)


def error_lines(errors: list[tuple[str, int]], limit: int = 5, width: int = 300) -> list[str]:
    """``COUNT × MESSAGE`` for the ``limit`` most common errors (``error_groups``), each on one
    printable line of at most ``width`` characters, then how many other messages there are."""
    lines = []
    for message, n in errors[:limit]:
        text = printable(" ".join(message.split()))
        lines.append(f"{n} × {text if len(text) <= width else text[: width - 1] + '…'}")
    rest = errors[limit:]
    if rest:
        lines.append(f"… {count(len(rest), 'other message')} ({sum(n for _, n in rest)} cases)")
    return lines
