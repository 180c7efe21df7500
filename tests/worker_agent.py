"""The agent the worker tests serve (`loopstate worker --agent worker_agent:agent`): one gated,
non-idempotent `charge` per run, then an answer. Every charge appends `run_id call_id` to the
file named by LOOPSTATE_TEST_EFFECTS, so the tests count executions across processes.

LOOPSTATE_TEST_KILL_AT=N: this process SIGKILLs itself inside its Nth charge, after the
effect (its outcome is then unknown). LOOPSTATE_TEST_HOLD=S: each charge takes S seconds.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

from loopstate import Agent, MemoryStore, ScriptedModel, Store, ToolContext, tool
from loopstate.engine.models.scripted import call

charged = 0


@tool(needs_approval=True)
async def charge(amount: int, ctx: ToolContext[None]) -> str:
    """Charge a card: not idempotent."""
    global charged
    charged += 1
    # A blocking append on purpose: the line must be on disk before a SIGKILL.
    with Path(os.environ["LOOPSTATE_TEST_EFFECTS"]).open("a") as effects:
        effects.write(f"{ctx.run_id} {ctx.call_id}\n")
    if charged == int(os.environ.get("LOOPSTATE_TEST_KILL_AT", "0")):
        os.kill(os.getpid(), signal.SIGKILL)
    await asyncio.sleep(float(os.environ.get("LOOPSTATE_TEST_HOLD", "0")))
    return f"charged {amount}"


def agent(store: Store | None = None, *, lease_s: float = 60.0) -> Agent:
    script = [call("charge", {"amount": 5}), "charged"]
    return Agent(
        ScriptedModel(script, by_step=True),
        [charge],
        store=store if store is not None else MemoryStore(),
        lease_s=lease_s,
    )
