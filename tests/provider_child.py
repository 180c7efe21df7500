"""A child process that resumes a suspended Claude run from a SQLite file, approving one call,
against the parent's model server. Prints the result as JSON.

usage: python provider_child.py DB API_BASE RUN_ID CALL_ID
"""

from __future__ import annotations

import asyncio
import json
import sys

from support import make_tools

from loopstate import Agent, Approve, LiteLLMModel
from loopstate.engine.stores.sqlite import SQLiteStore


async def main(db: str, api_base: str, run_id: str, call_id: str) -> None:
    _, tools = make_tools()
    model = LiteLLMModel(
        "anthropic/claude-sonnet-4-5",
        api_base=api_base,
        api_key="sk-ant-test",
        thinking={"type": "enabled", "budget_tokens": 1024},
        max_tokens=2048,
    )
    agent = Agent(model, tools, store=SQLiteStore(db))
    result = await agent.resume(run_id, decisions={call_id: Approve()})
    print(json.dumps({"status": result.status, "output": result.output}))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
