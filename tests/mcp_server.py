"""A small MCP server for the tests, written with the SDK's `MCPServer` (v1's FastMCP).

    python tests/mcp_server.py ROOT stdio     # speaks MCP on stdin/stdout
    python tests/mcp_server.py ROOT http      # streamable HTTP on 127.0.0.1, port from the OS;
                                              # prints "PORT <n>" once it listens

Files live under ROOT. `ROOT/asked.log` gets a line each time `delete_confirmed` asks its
question (a resolver the server runs again on every round); `ROOT/VARIANT` (if present)
changes `write_file`'s schema, as a server upgraded between two processes would.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Annotated

from mcp.server.mcpserver import Context, Elicit, Image, MCPServer, Resolve
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel

ROOT = Path(sys.argv[1])
with (ROOT / "pids.log").open("a") as pids:  # one line per server process started
    pids.write(f"{os.getpid()}\n")
server = MCPServer("files")
READ_ONLY = ToolAnnotations(readOnlyHint=True)
DESTRUCTIVE = ToolAnnotations(readOnlyHint=False, destructiveHint=True)


class FileInfo(BaseModel):
    path: str
    lines: int
    size: int


@server.tool(annotations=READ_ONLY)
def read_file(path: str) -> str:
    """Read a text file."""
    return (ROOT / path).read_text()


@server.tool(annotations=READ_ONLY)
def file_info(path: str) -> FileInfo:
    """Count a file's lines and bytes."""
    text = (ROOT / path).read_text()
    return FileInfo(path=path, lines=len(text.splitlines()), size=len(text.encode()))


if (ROOT / "VARIANT").exists():

    @server.tool(annotations=DESTRUCTIVE)
    def write_file(path: str, content: str, append: bool) -> str:
        """Write (or append to) a text file."""
        return "never"

else:

    @server.tool(annotations=DESTRUCTIVE)
    def write_file(path: str, content: str) -> str:
        """Write a text file, replacing it."""
        (ROOT / path).write_text(content)
        return f"wrote {len(content)} characters to {path}"


@server.tool(
    annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=True)
)
def delete_file(path: str) -> str:
    """Delete a file."""
    (ROOT / path).unlink(missing_ok=True)
    return f"deleted {path}"


@server.tool(annotations=READ_ONLY)
def missing(path: str) -> str:
    """Fails with a message the model should read."""
    raise ToolError(f"no such file: {path}")


@server.tool(annotations=READ_ONLY)
def picture() -> Image:
    """A tiny PNG."""
    return Image(data=b"\x89PNG\r\n\x1a\n" + b"\0" * 8, format="png")


@server.tool(annotations=READ_ONLY)
def crash() -> str:
    """Kills this server mid-call (SIGKILL), as an out-of-memory kill would."""
    os.kill(os.getpid(), signal.SIGKILL)
    return "unreachable"


@server.tool(annotations=READ_ONLY)
def stall() -> str:
    """Never answers."""
    time.sleep(3600)
    return "unreachable"


class Confirmation(BaseModel):
    confirm: bool
    reason: str


def ask_first(path: str) -> Elicit[Confirmation]:
    with (ROOT / "asked.log").open("a") as log:
        log.write(f"{path}\n")
    return Elicit(f"Really delete {path}?", Confirmation)


@server.tool(annotations=DESTRUCTIVE)
def delete_confirmed(path: str, answer: Annotated[Confirmation, Resolve(ask_first)]) -> str:
    """Delete a file once the user confirms."""
    if not answer.confirm:
        return f"kept {path}: {answer.reason}"
    (ROOT / path).unlink(missing_ok=True)
    return f"deleted {path}: {answer.reason}"


class NewName(BaseModel):
    name: str


@server.tool(annotations=DESTRUCTIVE)
async def rename_asking(path: str, ctx: Context) -> str:
    """Rename a file, asking for the new name mid-call (pre-2026 servers' way)."""
    with (ROOT / "asked.log").open("a") as log:
        log.write(f"{path}\n")
    answer = await ctx.elicit(f"New name for {path}?", NewName)
    if answer.action != "accept":
        return f"not renamed ({answer.action})"
    (ROOT / path).rename(ROOT / answer.data.name)
    return f"renamed {path} to {answer.data.name}"


def serve_http() -> None:
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)  # connections queue from now on: the port line is a true signal
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    if sys.argv[2] == "http":
        serve_http()
    else:
        server.run("stdio")
