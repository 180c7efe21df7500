"""`loopstate runs fork RUN --at SEQ [--message TEXT] [--result CALL=TEXT]`: a new run whose
past is a stored run's up to a transition, copied (see `loopstate.engine.fork`); prints its id.
Continue it with `loopstate resume NEW --agent mod:attr` (any agent with the tools it needs)."""

from __future__ import annotations

import argparse
import uuid
from collections.abc import Callable
from typing import Any

from loopstate.engine.clock import system_clock
from loopstate.engine.errors import ForkRefused
from loopstate.engine.fork import fork_run
from loopstate.engine.store import DEFAULT_LEASE_S, Store, lease_owner


def register_fork(command: Callable[..., Any], which: Any, user: str) -> None:
    """Add `runs fork` to the `runs` subcommands (`command` adds the store options)."""
    fork = command(which, "fork", _fork, help="copy a run up to a transition into a new run")
    fork.add_argument("run", help="a run id, or a unique start of one")
    fork.add_argument("--at", type=int, required=True, metavar="SEQ", help="the transition")
    fork.add_argument("--message", help="a user message appended at the fork point")
    fork.add_argument(
        "--result",
        action="append",
        default=[],
        metavar="CALL=TEXT",
        help="replace what a tool returned before the model saw it (repeatable)",
    )
    fork.add_argument(
        "--replace-message",
        metavar="INDEX=TEXT",
        help="replace the user message at INDEX of the history",
    )
    fork.add_argument("--actor", default=f"cli:{user}", help="who forks (audit)")


async def _fork(args: argparse.Namespace, store: Store) -> int:
    replaced = None
    if args.replace_message is not None:
        index, text = _pair(args.replace_message, "--replace-message INDEX=TEXT")
        if not index.isdigit():
            raise ForkRefused(f"--replace-message needs INDEX=TEXT with a number, not {index!r}")
        replaced = (int(index), text)
    results = dict(_pair(r, "--result CALL=TEXT") for r in args.result)
    fork = await fork_run(
        store, args.run, at=args.at, new_id=uuid.uuid4().hex, by=args.actor,
        clock=system_clock, owner=lease_owner(), lease_s=DEFAULT_LEASE_S,
        message=args.message, replace_result=results, replace_message=replaced,
    )  # fmt: skip
    print(fork.run_id)
    return 0


def _pair(text: str, form: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ForkRefused(f"{form} expected, got {text!r}")
    return key, value
