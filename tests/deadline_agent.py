"""The agent the deadline tests serve (`loopstate worker --agent deadline_agent:agent`) and
the child process that races an expiry against a decision.

Its clock is the number in the file LOOPSTATE_TEST_CLOCK: the test moves time on by writing
it, so a deadline passes when the test says, in every process at once. `send` is gated, with
a deadline of 2 s that denies; the model answers with what the tool's result said.

usage (the race): python deadline_agent.py DB (expire|approve) RUN_ID CALL_ID
    prints `ready`, waits for a line on stdin, acts, prints `applied` or the refusal's class.
"""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import timedelta
from pathlib import Path

from loopstate import Agent, Approve, Deny, MemoryStore, ModelRequest, ScriptedModel, Store, tool
from loopstate.engine.deadlines import expire_due
from loopstate.engine.errors import LoopstateError
from loopstate.engine.models.scripted import Turn, call, text
from loopstate.engine.operations import queue_decision
from loopstate.engine.stores.sqlite import SQLiteStore


def clock() -> float:
    return float(Path(os.environ["LOOPSTATE_TEST_CLOCK"]).read_text())


def set_clock(path: Path, seconds: float) -> None:
    """Move the clock in `path` to `seconds` atomically: a worker process reading it at that
    moment sees the old time or the new, never a file truncated by `write_text`."""
    fresh = path.with_name(path.name + ".new")
    fresh.write_text(str(seconds))
    os.replace(fresh, path)


@tool(needs_approval=True, decide_within=timedelta(seconds=2), on_expiry=Deny("no answer in time"))
def send(to: str) -> str:
    """Send the report."""
    return f"sent to {to}"


def answer(request: ModelRequest) -> Turn:
    return text(f"told: {request.messages[-1].content}")


def agent(store: Store | None = None) -> Agent:
    model = ScriptedModel([call("send", {"to": "bob"}, id="c1"), answer], by_step=True)
    return Agent(model, [send], store=store or MemoryStore(), clock=clock)


async def race(db: str, act: str, run_id: str, call_id: str) -> str:
    store = SQLiteStore(db)
    print("ready", flush=True)
    await asyncio.to_thread(sys.stdin.readline)
    try:
        if act == "expire":
            return "applied" if await expire_due(store, clock=clock) else "none due"
        await queue_decision(store, run_id, call_id, Approve(), actor="person", clock=clock)
        return "applied"
    except LoopstateError as exc:
        return type(exc).__name__


if __name__ == "__main__":
    print(asyncio.run(race(*sys.argv[1:5])), flush=True)
