"""`bash`: run a shell command in the workspace, with a timeout that kills the whole group."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from typing import Any

from loopstate.engine.tool import ToolContext
from loopstate.tools.builtin.workspace import root_of
from loopstate.tools.decorator import tool

MAX_OUTPUT = 30_000


@tool(needs_approval=True, category="shell")
async def bash(ctx: ToolContext[Any], command: str, timeout: float = 120.0) -> str:  # noqa: ASYNC109 (the model sets it)
    """Run a bash command with the workspace as its working directory.

    Args:
        command: the command line, run by /bin/bash -c
        timeout: seconds before the command and every process it started are killed
    """
    # The command is the model's own shell text, passed as one argv element: the library
    # never builds a shell string out of arguments.
    proc = await asyncio.create_subprocess_exec(
        "/bin/bash", "-c", command,
        cwd=root_of(ctx),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,  # its own process group, so a timeout can kill all of it
    )  # fmt: skip
    assert proc.stdout is not None
    try:
        async with asyncio.timeout(timeout):
            output, total = await _read_capped(proc.stdout, MAX_OUTPUT)
            code = await proc.wait()
    except TimeoutError:
        _kill_group(proc.pid)
        await proc.wait()
        return f"timed out after {timeout:g} s; the command and its children were killed"
    except BaseException:  # cancelled: leave nothing running
        _kill_group(proc.pid)
        raise
    text = output.decode("utf-8", errors="replace")
    if total > MAX_OUTPUT:
        text += f"\n[output truncated: {MAX_OUTPUT} of {total} bytes shown]"
    return f"exit code {code}\n{text}"


async def _read_capped(stream: asyncio.StreamReader, limit: int) -> tuple[bytes, int]:
    """Read to EOF, keeping the first `limit` bytes and counting the rest."""
    kept = bytearray()
    total = 0
    while chunk := await stream.read(65536):
        total += len(chunk)
        if len(kept) < limit:
            kept.extend(chunk[: limit - len(kept)])
    return bytes(kept), total


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
