"""An MCP server's tools under loopstate's control, offline: `python examples/mcp_files.py`.

This file is also the MCP server (`python examples/mcp_files.py serve ROOT`): three file
tools written with the SDK's `MCPServer` (FastMCP before mcp 2), annotated read-only or
destructive, and a delete that asks its user to confirm (elicitation). The agent starts it
over stdio: the read-only call runs, the write waits for approval, another agent (as another
process would) approves it and the run goes on; the delete's question suspends the run until
a person answers. The model is scripted; give `Agent` a litellm model name to run it for real.
"""

# no `from __future__ import annotations`: the server reads its tools' annotations at runtime

import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel


class Confirmation(BaseModel):
    confirm: bool


def serve(root: Path) -> None:
    """The MCP server: files under `root`, on stdin/stdout."""
    from mcp.server.mcpserver import Elicit, MCPServer, Resolve
    from mcp.types import ToolAnnotations

    server = MCPServer("files")
    read_only = ToolAnnotations(readOnlyHint=True)
    destructive = ToolAnnotations(readOnlyHint=False, destructiveHint=True)

    @server.tool(annotations=read_only)
    def list_files() -> list[str]:
        """The names of the files."""
        return sorted(p.name for p in root.iterdir())

    @server.tool(annotations=destructive)
    def write_file(name: str, content: str) -> str:
        """Write a file, replacing it."""
        (root / name).write_text(content)
        return f"wrote {name}"

    def confirm(name: str) -> Elicit[Confirmation]:
        return Elicit(f"Delete {name}?", Confirmation)

    @server.tool(annotations=destructive)
    def delete_file(name: str, ok: Annotated[Confirmation, Resolve(confirm)]) -> str:
        """Delete a file (its user confirms first)."""
        if not ok.confirm:
            return f"kept {name}"
        (root / name).unlink()
        return f"deleted {name}"

    server.run("stdio")


async def demo(root: Path) -> None:
    from loopstate import Agent, Approve, SQLiteStore
    from loopstate.testing import ScriptedModel, call, calls
    from loopstate.tools.mcp import MCPServer

    (root / "draft.md").write_text("old draft\n")
    script = [
        calls(call("files_list_files", {}),
              call("files_write_file", {"name": "notes.md", "content": "# Notes\n"})),
        call("files_delete_file", {"name": "draft.md"}),
        "Wrote notes.md and deleted draft.md.",
    ]  # fmt: skip
    store = root.parent / "runs.db"

    def agent() -> Agent:  # the same agent in any process: it starts its own server
        files = MCPServer.stdio(
            sys.executable, [__file__, "serve", str(root)], namespace="files",
            needs_approval={"delete_file": False},  # its confirmation is enough
        )  # fmt: skip
        model = ScriptedModel(script, by_step=True)
        return Agent(model, [files], store=SQLiteStore(store), ids=lambda: "tidy-1")

    first = await agent().run("Tidy the folder")
    (write,) = first.pending
    print(f"{first.status}: {write.tool} {dict(write.arguments)}")
    print(f"  why: {write.reason}")
    second = await agent().resume("tidy-1", {write.call_id: Approve()})
    (question,) = second.pending
    print(f"{second.status}: the server asks {question.reason!r}")
    done = await agent().resume("tidy-1", results={question.call_id: {"confirm": True}})
    print(f"{done.status}: {done.output}")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "files"
        root.mkdir()
        asyncio.run(demo(root))
        print("files:", ", ".join(sorted(p.name for p in root.iterdir())))


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(Path(sys.argv[2]))
    else:
        main()
