"""A supervisor and its writer sub-agent for the sub-agent tests that use other processes.

`--agent subagent_team:supervisor` gives the CLI the supervisor (its store: `LOOPSTATE_DB`).
With `MODEL_BASE` set both talk to that model server (tests/model_server.py, one script served
in order); otherwise they use scripted models chosen by step, so each process continues the
script where the runs are. `python subagent_team.py run` starts a run and prints its result
as JSON. The writer's `slow` tool touches `$MARK` and then sleeps: a test SIGKILLs the
process there, mid-delegation.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

from loopstate import Agent, Model, ScriptedModel, SQLiteStore, tool
from loopstate.engine.models.scripted import call


@tool(needs_approval=True)
def publish(text: str) -> str:
    """Publish a text."""
    with open(os.environ["PUBLISHED"], "a") as f:
        f.write(text + "\n")
    return f"published {text!r}"


@tool
def slow() -> str:
    """Work for a long time."""
    Path(os.environ["MARK"]).touch()
    time.sleep(float(os.environ.get("SLOW_S", "60")))
    return "slow work done"


def model(script: list[object]) -> Model:
    base = os.environ.get("MODEL_BASE")
    if base is None:
        return ScriptedModel(script, by_step=True)  # type: ignore[arg-type]
    from loopstate import LiteLLMModel

    return LiteLLMModel("openai/test-model", api_base=base, api_key="k")


def supervisor() -> Agent:
    store = SQLiteStore(os.environ["LOOPSTATE_DB"])
    crashing = bool(os.environ.get("MARK"))
    first = call("slow", {}) if crashing else call("publish", {"text": "hi"})
    writer = Agent(
        model([first, "Done."]),
        [slow if crashing else publish],
        instructions="You write.",
        store=store,
    )
    delegate = writer.as_tool(name="writer", description="Writes and publishes texts.")
    return Agent(
        model([call("writer", {"task": "publish hi"}), "The writer published it."]),
        [delegate],
        instructions="You supervise.",
        store=store,
    )


if __name__ == "__main__":
    assert sys.argv[1:] == ["run"], "usage: subagent_team.py run"
    result = asyncio.run(supervisor().run("go", run_id=os.environ.get("RUN_ID")))
    print(result.model_dump_json(include={"run_id", "status", "pending", "output"}))
