"""The ``ragproof`` command line: parses arguments and dispatches to ``gate.commands.*``.

Each command lives in its own module under ``gate/commands/`` exposing::

    HELP: str                                   # one-line description
    def add_arguments(parser: argparse.ArgumentParser) -> None
    def run(args: argparse.Namespace, env: Environment) -> int   # exit code

Command modules import heavy dependencies (numpy, scipy, jinja2) inside ``run`` so that
``ragproof --help`` and the argument parser stay fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import NoReturn

from gate import __version__
from gate.core import process_exit
from gate.core.environment import Environment
from gate.core.errors import EXIT_FAILED, EXIT_USAGE, RagproofError

# sub-command name -> module under gate.commands
COMMANDS: dict[str, str] = {
    "run": "run",
    "merge": "merge",
    "compare": "compare",
    "report": "report",
    "validate": "validate",
    "init": "init",
    "import": "import_data",
    "demo": "demo",
    "calibrate": "calibrate",
    "rescore": "rescore",
    "generate-injections": "generate_injections",
    "action": "action",
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # argparse prints usage + message and exits 2; our usage errors are 64, one line.
        raise RagproofError(f"{self.prog}: {message}")


def _load(module: str) -> ModuleType:
    return importlib.import_module(f"gate.commands.{module}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="ragproof", description="A CI gate for RAG pipelines.")
    parser.add_argument("--version", action="version", version=f"ragproof {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, module_name in COMMANDS.items():
        module = _load(module_name)
        cmd = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(cmd)
        cmd.set_defaults(_module=module)
    return parser


def console() -> NoReturn:
    """The ``ragproof`` console script: :func:`main`, then the process ends with its code
    (without freeing, object by object, what a command kept: :mod:`gate.core.process_exit`)."""
    process_exit.as_console()
    process_exit.end(main())


def main(argv: Sequence[str] | None = None, env: Environment | None = None) -> int:
    """Run one command with ``argv`` (default ``sys.argv[1:]``). Returns the process exit code."""
    env = env or Environment.from_process()
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except RagproofError as exc:
        print(f"ragproof: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not getattr(args, "_module", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return int(args._module.run(args, env))
    except RagproofError as exc:
        print(f"ragproof: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("ragproof: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_FAILED
