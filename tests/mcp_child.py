"""Another process for the MCP tests: resumes run-1 of the test MCP server's agent, which
connects to the server anew (its own stdio subprocess), and prints the result as JSON.

usage: python mcp_child.py DB ROOT SCRIPT RESUME
SCRIPT: the model's turns as JSON (a string, or {"call": name, "arguments": {...}});
RESUME: {"decisions": {call_id: "approve"}} or {"results": {call_id: value}}.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from mcp_support import files_agent, stdio_files

from loopstate import Approve
from loopstate.engine.models.scripted import ScriptItem, call


def turns(script: list[Any]) -> list[ScriptItem]:
    return [t if isinstance(t, str) else call(t["call"], t["arguments"]) for t in script]


async def main(db: Path, root: Path, script: list[Any], resume: dict[str, Any]) -> None:
    agent = files_agent(db, turns(script), stdio_files(root))
    decisions = {c: Approve() for c in resume.get("decisions", {})}
    result = await agent.resume("run-1", decisions, results=resume.get("results"))
    requests = agent.model.requests  # type: ignore[attr-defined]
    told = [m.content for m in requests[-1].messages if m.role == "tool"] if requests else []
    print(json.dumps({"status": result.status, "output": result.output, "told": told}))


if __name__ == "__main__":
    db, root, script, resume = sys.argv[1:5]
    asyncio.run(main(Path(db), Path(root), json.loads(script), json.loads(resume)))
