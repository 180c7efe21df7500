"""The agent the service tests serve (`loopstate serve --agent service_agent:agent`).

Its model asks, in one batch, for a gated `charge` (not idempotent: each execution appends a
line to the file named by LOOPSTATE_TEST_EFFECTS) and a gated `send_email`; then answers.
LOOPSTATE_TEST_HOLD=S: each charge takes S seconds (a run that is mid-way for a while).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from loopstate import Agent, MemoryStore, ScriptedModel, Store, ToolContext, tool
from loopstate.engine.models.scripted import call, calls


@tool(needs_approval=True)
async def charge(amount: int, ctx: ToolContext[None]) -> str:
    """Charge a card: not idempotent."""
    with Path(os.environ["LOOPSTATE_TEST_EFFECTS"]).open("a") as effects:
        effects.write(f"{ctx.run_id} {ctx.call_id} {amount}\n")
    await asyncio.sleep(float(os.environ.get("LOOPSTATE_TEST_HOLD", "0")))
    return f"charged {amount}"


@tool(needs_approval=True)
async def send_email(to: str, body: str) -> str:
    """Send an email."""
    return f"sent to {to}"


def agent(store: Store | None = None) -> Agent:
    script = [
        calls(
            call("charge", {"amount": 5}),
            call("send_email", {"to": "ops@example.com", "body": "<script>alert(1)</script>"}),
        ),
        "all done",
        "glad to help",  # the answer to a follow-up message
    ]
    return Agent(
        ScriptedModel(script, by_step=True),
        [charge, send_email],
        store=store if store is not None else MemoryStore(),
    )


def team(store: Store | None = None) -> Agent:
    """A supervisor that delegates charging to a sub-agent: the charge waits in the sub-agent's
    run, and the inbox decides it there."""
    store = store if store is not None else MemoryStore()
    payer = Agent(
        ScriptedModel([call("charge", {"amount": 7}), "charged 7"], by_step=True),
        [charge],
        store=store,
    )
    return Agent(
        ScriptedModel([call("payer", {"task": "charge 7"}), "the payer charged 7"], by_step=True),
        [payer.as_tool(name="payer", description="Charges cards.")],
        store=store,
    )
