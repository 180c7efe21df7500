"""How a command reports an expected failure: one line on stderr and an exit code.

Exit 2: what was typed cannot be carried out (a bad argument, an unknown run or call, a run
that cannot take it); exit 1: something failed while carrying it out (the store, a busy run,
a failed run). As pytest, ruff and uv do, never a traceback for an expected condition.
"""

from __future__ import annotations

import sys

from loopstate.cli.text import shown
from loopstate.engine.errors import (
    DecisionError,
    DefinitionError,
    ForkRefused,
    LoopstateError,
    RunNotFound,
    RunNotResumable,
)

USAGE_ERRORS = (DefinitionError, DecisionError, ForkRefused, RunNotFound, RunNotResumable)


def report(command: str, exc: LoopstateError) -> int:
    """Print `exc` as one line naming the command; return its exit code."""
    message = str(exc) or type(exc).__name__
    print(shown(f"loopstate {command}: {message}"), file=sys.stderr)
    return 2 if isinstance(exc, USAGE_ERRORS) else 1


def interrupted(run_id: str, exc: KeyboardInterrupt, *, agent: str | None = None) -> int:
    """Print the one line for a run interrupted by Ctrl-C or SIGTERM (it stands where it was
    saved, resumable); return the exit code a shell expects (130, or 143 for SIGTERM)."""
    from loopstate.engine.errors import RunInterrupted
    from loopstate.engine.sync import Terminated

    stopped = RunInterrupted(run_id, "SIGTERM" if isinstance(exc, Terminated) else "SIGINT",
                             agent=agent)  # fmt: skip
    print(shown(stopped.line), file=sys.stderr, flush=True)
    return int(stopped.code or 130)
