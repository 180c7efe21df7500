"""The agent `loopstate resume --agent interrupt_agent:agent` continues in
tests/test_interruptions.py: the tools of tests/interrupt_child.py, whose idempotent `put`
announces its start on stdout and then waits until the process is interrupted."""

from __future__ import annotations

import asyncio

from loopstate import Agent, ModelRequest, ScriptedModel, tool
from loopstate.engine.models.scripted import call


@tool
async def charge(amount: int) -> str:
    """Charge a card: not idempotent."""
    raise AssertionError("not called here")


@tool(idempotent=True)
async def put(key: str) -> str:
    """Store a key: idempotent."""
    print("tool put started", flush=True)
    await asyncio.Event().wait()  # until this process is interrupted
    return "put done"


def told(request: ModelRequest) -> str:
    return f"told: {request.messages[-1].content}"


def agent() -> Agent:
    model = ScriptedModel([call("put", {"key": "k"}), told], by_step=True)
    return Agent(model, [charge, put], auto_approve=True)
