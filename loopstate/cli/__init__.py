"""The `loopstate` command. Each subcommand lives in its own module with a `register` function."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Modules that add subcommands; each defines `register(subparsers) -> None` and sets
# `func` on its parser (a callable taking the parsed namespace, returning an exit code).
COMMANDS = (
    "loopstate.cli.demo",
    "loopstate.cli.diagram",
    "loopstate.cli.replay",
    "loopstate.cli.runs",
    "loopstate.cli.serve",
    "loopstate.cli.worker",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="loopstate", description="Run, inspect, decide and draw loopstate agent runs."
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
