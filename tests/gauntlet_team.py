"""The gauntlet for the pipeline tests that use other processes, on `LOOPSTATE_DB`.

`--agent gauntlet_team:flow` gives the CLI the flow. Each agent's model is scripted by step,
so a process continues the script where each child run is. The writer's `write` needs
approval. With `MARK` set the writer calls `slow` instead (it appends to `$MARK`, then
sleeps): a test SIGKILLs the process there, mid-phase. `python gauntlet_team.py run` starts
a run and prints its result as JSON.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

from loopstate import Flow, ScriptedModel, SQLiteStore, tool
from loopstate.engine.models.scripted import call
from loopstate.machines.gauntlet import gauntlet_flow

WORKSPACE = Path(os.environ.get("WORKSPACE", "."))


@tool
def slow() -> str:
    """Work for a long time."""
    with open(os.environ["MARK"], "a") as f:
        f.write("started\n")
    time.sleep(float(os.environ.get("SLOW_S", "60")))
    return "slow work done"


def flow() -> Flow:
    crashing = bool(os.environ.get("MARK"))
    write = call("write", {"path": "piece.md", "content": "Tides follow the moon."})
    submit = call("submit_write", {"path": "piece.md", "summary": "why tides happen"})
    writer = [call("slow", {}), submit] if crashing else [write, submit]

    def reviewer(phase: str) -> ScriptedModel:
        verdict = call(f"submit_{phase}", {"approved": True, "notes": ""})
        return ScriptedModel([call("read", {"path": "piece.md"}), verdict], by_step=True)

    built = gauntlet_flow(
        models={
            "writer": ScriptedModel(writer, by_step=True),
            "style": reviewer("style_review"),
            "facts": reviewer("fact_review"),
        },
        workspace=WORKSPACE,
        store=SQLiteStore(os.environ["LOOPSTATE_DB"]),
    )
    if not crashing:
        return built
    phases = dict(built.phases)
    agent = phases["write"].spec.agent
    assert agent is not None
    from dataclasses import replace

    spec = replace(phases["write"].spec, agent=agent.clone(tools=[*agent.tools, slow]))
    return built.clone(phases={**{n: p.spec for n, p in phases.items()}, "write": spec})


if __name__ == "__main__":
    assert sys.argv[1:] == ["run"], "usage: gauntlet_team.py run"
    brief = "Explain tides"
    result = asyncio.run(flow().run(brief, data={"brief": brief}, run_id="gauntlet-1"))
    print(result.model_dump_json(include={"run_id", "status", "phase", "pending"}))
