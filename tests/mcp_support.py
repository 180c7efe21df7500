"""The test MCP server (`mcp_server.py`) as a loopstate toolset, over stdio or streamable
HTTP, and an agent on it whose model's words are scripted by step (so a process that resumes
the run gets the right turn)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from support import forking

from loopstate import Agent, ScriptedModel, SQLiteStore
from loopstate.engine.models.scripted import ScriptItem
from loopstate.tools.mcp import MCPServer

SERVER = Path(__file__).with_name("mcp_server.py")
LAUNCHER = Path(__file__).with_name("forked_stdio.py")
SDK = "mcp.server.mcpserver,pydantic"
"""What the test server imports, imported by the fork server once for all its starts."""
FORK_SOCKET = "LOOPSTATE_TESTS_FORK_SOCKET"


def stdio_files(root: Path, **options: Any) -> MCPServer:
    """The test server as a subprocess on stdin/stdout, its tools named `files_*`.

    The SDK starts `forked_stdio.py`, a bare interpreter that has the tests' fork server fork
    the server onto its pipes (the server's imports, the SDK's, are then done once: seconds
    of CPU per start). The fork server is this test process's, or, in a child process of the
    tests, the one FORK_SOCKET names."""
    options.setdefault("namespace", "files")
    socket = os.environ.get(FORK_SOCKET) or forking.server_socket()
    args = ["-I", "-S", str(LAUNCHER), socket, SDK, str(SERVER), str(root), "stdio"]
    return MCPServer.stdio(sys.executable, args, **options)


def forked_children_env() -> dict[str, str]:
    """The environment of a child process of the tests that starts stdio servers: they are
    forked by this test process's fork server too."""
    return {**os.environ, FORK_SOCKET: forking.server_socket()}


@contextmanager
def http_files(root: Path) -> Iterator[str]:
    """The test server over streamable HTTP on 127.0.0.1: its URL once it listens."""
    proc = forking.Popen(
        [sys.executable, str(SERVER), str(root), "http"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # "PORT n", printed once the socket listens
        assert line.startswith("PORT "), line
        yield f"http://127.0.0.1:{line.split()[1]}/mcp"
    finally:
        proc.kill()
        proc.wait(timeout=300)
        if proc.stdout is not None:
            proc.stdout.close()


def files_agent(db: Path, script: Sequence[ScriptItem], *tools: Any, **options: Any) -> Agent:
    model = ScriptedModel(list(script), by_step=True)
    return Agent(model, list(tools), store=SQLiteStore(db), ids=lambda: "run-1", **options)
