"""The agents of one shop across deploys (`loopstate resume --agent deploy_agents:v2`): the
run-pinning tests start runs under one and resume them under another, in other processes.

v1 ("2025-10"): `refund` (gated), `lookup`. v0 ("2025-09"): the same tools. v2 ("2025-11"):
`refund` renamed `issue_refund`, a new `note`, and a migration for v1's runs; `v2_added`:
v1 plus `note`; `v2_removed`: v1 without `refund`, no migration. Each refund appends a line
to the file LOOPSTATE_TEST_EFFECTS names (it is not idempotent: it must run once).
`python deploy_agents.py DB [--approve] RUN_ID=VARIANT...` starts each run (it suspends on its
refund), with `--approve` queues an approval for it (as `loopstate approve` does), and prints
each run's status.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from loopstate import Agent, Migration, RunState, ScriptedModel, SQLiteStore, ToolContext, tool
from loopstate.engine.models.scripted import call


def _effect(ctx: ToolContext[None], text: str) -> str:
    with Path(os.environ["LOOPSTATE_TEST_EFFECTS"]).open("a") as effects:
        effects.write(f"{ctx.run_id} {ctx.call_id} {text}\n")
    return text


@tool(needs_approval=True)
def refund(order: str, ctx: ToolContext[None]) -> str:
    """Refund an order."""
    return _effect(ctx, f"refunded {order}")


@tool(needs_approval=True)
def issue_refund(order: str, ctx: ToolContext[None]) -> str:
    """Refund an order, with a receipt."""
    return _effect(ctx, f"issued refund for {order}")


@tool
def lookup(order: str) -> str:
    """Look an order up."""
    return f"order {order}: paid"


@tool
def note(text: str) -> str:
    """Write a note on the order."""
    return "noted"


def rename_refund(run: RunState) -> RunState:
    """v1's pending `refund` calls become `issue_refund` calls (same arguments)."""
    for c in run.batch:
        if c.tool == "refund":
            run = run.replace_call(c.model_copy(update={"tool": "issue_refund"}))
    return run


def _agent(tools: list[object], version: str, **options: object) -> Agent:
    first = "refund" if any(getattr(t, "name", "") == "refund" for t in tools) else "issue_refund"
    script = ScriptedModel([call(first, {"order": "A1"}), "Refunded."], by_step=True)
    return Agent(script, tools, instructions="You run the shop.", version=version,  # type: ignore[arg-type]
                 store=SQLiteStore(os.environ.get("LOOPSTATE_DB")), **options)  # type: ignore[arg-type]  # fmt: skip


def v0() -> Agent:
    return _agent([refund, lookup], "2025-09")


def v1() -> Agent:
    return _agent([refund, lookup], "2025-10")


def v2_added() -> Agent:
    return _agent([refund, lookup, note], "2025-10")


def v2_removed() -> Agent:
    return _agent([lookup, note], "2025-11")


def v2() -> Agent:
    migrations = [Migration(from_="2025-10", apply=rename_refund)]
    return _agent([issue_refund, lookup, note], "2025-11", migrations=migrations)


def v2_pre() -> Agent:
    """v2 before `note` was added: its runs are compatible with v2."""
    return _agent([issue_refund, lookup], "2025-11")


async def _start(runs: list[str], approve: bool) -> None:
    from loopstate import Approve
    from loopstate.engine.operations import queue_decision

    for pair in runs:
        run_id, _, variant = pair.partition("=")
        agent: Agent = globals()[variant]()
        result = await agent.run("refund A1", run_id=run_id)
        if approve:
            await queue_decision(agent.store, run_id, "call_1_1", Approve(), actor="test")
        print(result.status, flush=True)


if __name__ == "__main__":
    os.environ["LOOPSTATE_DB"] = sys.argv[1]
    given = sys.argv[2:]
    asyncio.run(_start([a for a in given if a != "--approve"], "--approve" in given))
