"""Call built-in tools the way the executor does: validate, then invoke with a context."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loopstate import Tool, ToolContext


async def invoke(tool: Tool, workspace: Path | None, **arguments: Any) -> str:
    ctx: ToolContext[None] = ToolContext(
        run_id="run-1", call_id="call-1", tool=tool.name, deps=None, workspace=workspace
    )
    return await tool.invoke(tool.validate(arguments), ctx)
