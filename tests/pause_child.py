"""A child process for the pause tests: runs one agent run whose tool announces on stdout that
its body started, then waits for a line on stdin before it returns; prints the run's status
when the run stops.

usage: python pause_child.py DB RUN_ID
"""

from __future__ import annotations

import asyncio
import sys

from loopstate import Agent, ScriptedModel, tool
from loopstate.engine.models.scripted import call
from loopstate.engine.stores.sqlite import SQLiteStore


async def line_from_parent() -> str:
    return await asyncio.to_thread(sys.stdin.readline)


@tool
async def step(n: int) -> str:
    """Do one step of the job."""
    print(f"step {n} started", flush=True)
    await line_from_parent()
    return f"step {n} done"


def script() -> ScriptedModel:
    """Three steps, then the answer: the same words the test's own run is given."""
    return ScriptedModel([call("step", {"n": 1}), call("step", {"n": 2}), "All steps done."])


if __name__ == "__main__":
    agent = Agent(script(), [step], store=SQLiteStore(sys.argv[1]))
    result = agent.run_sync("do the job", run_id=sys.argv[2])
    print(f"stopped {result.status}", flush=True)
