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


def load_config_from_args(args: argparse.Namespace, env: Environment) -> Config:
    """The config named by ``-c``, relative to the working directory, with RAGPROOF_* overrides."""
    path = Path(args.config)
    return load_config(path if path.is_absolute() else env.cwd / path, env.variables)


def resolve(env: Environment, path: str | Path) -> Path:
    """A command-line path, relative to the working directory."""
    p = Path(path)
    return p if p.is_absolute() else env.cwd / p


def count(n: int, noun: str) -> str:
    """``3 cases``, ``1 case``."""
    return f"{n} {noun}" + ("" if n == 1 else "s")
