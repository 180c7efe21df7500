"""A child process for the interruption tests: runs (`run_sync`) or resumes (`resume_sync`) one
agent run whose model is served over real HTTP (tests/model_server.py), and whose tools
announce on stdout that their body started, then wait until the process is interrupted.

usage: python interrupt_child.py DB WORKDIR (API_BASE|charge|put) (run|resume) RUN_ID

API_BASE: the model is litellm over HTTP. `charge` or `put`: a scripted model (no litellm to
import) calls that tool, then answers with what the tool's result said.
Every tool body start is appended to WORKDIR/log.txt, so the parent counts them across
processes. `resume` prints the run's status and output as one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from loopstate import Agent, LiteLLMModel, Model, ModelRequest, ScriptedModel, tool
from loopstate.engine.models.scripted import call
from loopstate.engine.stores.sqlite import SQLiteStore

parser = argparse.ArgumentParser()
parser.add_argument("db")
parser.add_argument("workdir", type=Path)
parser.add_argument("api_base")
parser.add_argument("mode", choices=["run", "resume"])
parser.add_argument("run_id")
args = parser.parse_args()


async def body(name: str) -> str:
    with (args.workdir / "log.txt").open("a") as f:
        f.write(f"tool {name}\n")
    if args.mode == "run":
        print(f"tool {name} started", flush=True)
        await asyncio.Event().wait()  # until the parent interrupts this process
    return f"{name} done"


@tool
async def charge(amount: int) -> str:
    """Charge a card: not idempotent."""
    return await body("charge")


@tool(idempotent=True)
async def put(key: str) -> str:
    """Store a key: idempotent."""
    return await body("put")


def told(request: ModelRequest) -> str:
    return f"told: {request.messages[-1].content}"


def model() -> Model:
    if args.api_base in ("charge", "put"):
        return ScriptedModel([call(args.api_base, {"amount": 5} if args.api_base == "charge"
                                   else {"key": "k"}), told], by_step=True)  # fmt: skip
    return LiteLLMModel("openai/test-model", api_base=args.api_base, api_key="k")


agent = Agent(
    model(),
    [charge, put],
    store=SQLiteStore(args.db),
    auto_approve=True,
)

if args.mode == "run":
    agent.run_sync("go", run_id=args.run_id)
else:
    result = agent.resume_sync(args.run_id)
    print(json.dumps({"status": result.status, "output": result.output}), flush=True)
