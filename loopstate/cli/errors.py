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
