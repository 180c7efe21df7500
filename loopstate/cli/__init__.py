"""The `loopstate` command. Each subcommand lives in its own module with a `register` function."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from loopstate.cli.stores import DB_HELP

# Modules that add subcommands; each defines `register(subparsers) -> None` and sets
# `func` on its parser (a callable taking the parsed namespace, returning an exit code).
COMMANDS = (
    "loopstate.cli.demo",
    "loopstate.cli.diagram",
    "loopstate.cli.replay",
    "loopstate.cli.runs",
    "loopstate.cli.temporal",
    "loopstate.cli.serve",
    "loopstate.cli.store",
    "loopstate.cli.worker",
)


def build_parser() -> argparse.ArgumentParser:
    from loopstate import __version__

    parser = argparse.ArgumentParser(
        prog="loopstate", description="Run, inspect, decide and draw loopstate agent runs."
    )
    parser.add_argument("--version", action="version", version=f"loopstate {__version__}")
    parser.add_argument("--db", default=None, metavar="DB", help=DB_HELP)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`loopstate runs list | head -1`): stop quietly. Python's own
        # recipe: point stdout at devnull so the flush at exit does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        print(f"\nloopstate {args.command}: interrupted", file=sys.stderr)
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
