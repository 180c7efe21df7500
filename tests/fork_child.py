"""A child process for the fork tests: runs a source run whose tool blocks (the parent
SIGKILLs it mid-tool), forks a stored run, or resumes one. Tool executions are appended to a
log file, so the parent counts them across processes.

usage: python fork_child.py DB LOG URL run
       python fork_child.py DB LOG URL fork RUN SEQ
       python fork_child.py DB LOG URL resume RUN
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from loopstate import Agent, tool
from loopstate.engine.models.litellm import LiteLLMModel
from loopstate.engine.stores.sqlite import SQLiteStore

db, log, url, mode, *rest = sys.argv[1:]


@tool
def block() -> str:
    """Starts, says so, and never finishes (its process is killed)."""
    with Path(log).open("a") as out:
        out.write("block\n")
    print("started", flush=True)
    sys.stdin.readline()  # the parent never writes: it kills this process
    return "finished"


async def main() -> None:
    model = LiteLLMModel("openai/m", api_base=url, api_key="sk-test")
    agent = Agent(model, [block], store=SQLiteStore(db))
    if mode == "run":
        await agent.run("Block.", run_id="source")
    elif mode == "fork":
        print(await agent.fork(rest[0], at=int(rest[1])), flush=True)
    else:
        result = await agent.resume(rest[0])
        print(json.dumps({"status": result.status, "output": result.output}), flush=True)


asyncio.run(main())
