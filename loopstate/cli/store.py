"""`loopstate store prune`: remove the store-wide event log's entries and the idempotency
answers older than an age (`--older-than 30d`). Runs themselves are never pruned."""

from __future__ import annotations

import argparse
import asyncio
import re
from typing import Any

from loopstate.cli.errors import report
from loopstate.cli.stores import add_db_option, close_store, db_of, open_store
from loopstate.engine.clock import system_clock
from loopstate.engine.errors import LoopstateError, StoreError
from loopstate.engine.store import Prunable, Pruned

UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_AGE = re.compile(r"^(\d+(?:\.\d+)?)([smhdw]?)$")


def age(text: str) -> float:
    """Seconds in an age such as `30d`, `12h`, `90m`, `45s`, `2w` (a bare number: seconds)."""
    found = _AGE.match(text.strip())
    if found is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an age: give a number and a unit, e.g. 30d, 12h, 90m, 45s"
        )
    return float(found[1]) * UNITS[found[2] or "s"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("store", help="look after the store (prune its logs)")
    commands = parser.add_subparsers(dest="store_command", required=True, metavar="COMMAND")
    prune = commands.add_parser(
        "prune",
        help="remove event-log entries and idempotency answers older than an age",
        description="Remove the store-wide event log's entries and the idempotency answers "
        "older than --older-than. Runs, their messages and transitions are kept, and so is "
        "every entry a stream client connected to any service process still needs (each "
        "process publishes its clients' position). A stream client that reconnects from a "
        "pruned entry is sent a `reset` event.",
    )
    prune.add_argument(
        "--older-than", type=age, required=True, metavar="AGE", help="e.g. 30d, 12h, 90m"
    )
    add_db_option(prune)
    prune.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    try:
        pruned = asyncio.run(_prune(db_of(args), args.older_than))
    except LoopstateError as exc:
        return report("store prune", exc)
    print(
        f"loopstate store prune: removed {pruned.events} event-log entries and "
        f"{pruned.answers} idempotency answers older than {args.older_than / 86400:g} days"
    )
    return 0


async def _prune(db: str, older_than: float) -> Pruned:
    store = open_store(db, must_exist=True)
    try:
        if not isinstance(store, Prunable):
            raise StoreError(f"{store!r} cannot be pruned")
        return await store.prune(before=system_clock() - older_than)
    finally:
        await close_store(store)
