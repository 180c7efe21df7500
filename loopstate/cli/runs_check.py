"""`loopstate runs check --agent mod:attr`: every run that is not final, judged as a resume
under that agent or flow would judge it: compatible, migrates (by which migration) or
incompatible (why). Exit 1 if any is incompatible, so it can gate a deploy."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from loopstate.checking import check_runs
from loopstate.cli.lookup import load_agent
from loopstate.cli.text import shown
from loopstate.engine.store import Store


def register_check(command: Callable[..., Any], which: Any) -> None:
    """Add `runs check` to the `runs` subcommands (`command` adds the store options)."""
    check = command(
        which,
        "check",
        _check,
        help="would each run that is not final resume under this agent? (exit 1 if any not)",
    )
    check.add_argument(
        "--agent", required=True, help="module:attr of the Agent or Flow about to be deployed"
    )
    check.add_argument("--json", action="store_true", help="machine-readable output")


async def _check(args: argparse.Namespace, store: Store) -> int:
    target = load_agent(args.agent).clone(store=store)
    judged = await check_runs(target, store)
    if args.json:
        print(json.dumps([
            {"run_id": j.state.run_id, "status": j.state.status, "verdict": j.verdict,
             "migration": j.migration, "lines": list(j.lines)}
            for j in judged
        ], indent=2))  # fmt: skip
    else:
        for j in judged:
            print(shown(f"{j.state.run_id}  {j.state.status}  {j.summary()}"))
        bad = sum(j.verdict == "incompatible" for j in judged)
        print(f"{len(judged)} runs checked, {bad} incompatible")
    return 1 if any(j.verdict == "incompatible" for j in judged) else 0
