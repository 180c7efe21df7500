"""`bash`: run a shell command in the workspace; on timeout the whole process group is killed.

The command is the model's own shell text, passed to `/bin/bash -c` as one argument: the
library never builds a shell string out of other values. The command runs in a new session
(its own process group) with the workspace as working directory, no stdin, and the parent's
environment minus variables named like credentials (`*_API_KEY`, `*_TOKEN`, `*SECRET*`, ...),
so a command such as `env` cannot put them into the run's history. When the command ends,
processes it left in the background are killed with it; on timeout all of them are killed
(SIGKILL to the group, which a process ignoring SIGTERM cannot survive). Output (stdout and
stderr interleaved) keeps its first and last parts with a note of how much was cut.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Field

from loopstate.engine.tool import ToolContext
from loopstate.tools.builtin.workspace import ToolError, root_of
from loopstate.tools.decorator import tool

MAX_OUTPUT = 30_000
MAX_TIMEOUT = 600.0
DRAIN_S = 1.0  # how long output still in the pipe is read after the process group is gone
_CREDENTIAL = re.compile(
    r"(^|_)(API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)(_|$)", re.IGNORECASE
)


@tool(needs_approval=True, category="shell")
async def bash(
    ctx: ToolContext[Any],
    command: str,
    timeout: Annotated[float, Field(gt=0, le=MAX_TIMEOUT)] = 120.0,  # noqa: ASYNC109 (the model sets it)
) -> str:
    """Run a bash command with the workspace as its working directory; returns the exit code
    and the output. Background processes are stopped when the command ends.

    Args:
        command: the command line, run by /bin/bash -c
        timeout: seconds before the command and every process it started are killed
    """
    if not command.strip():
        raise ToolError("the command is empty")
    proc = await asyncio.create_subprocess_exec(
        "/bin/bash", "-c", command,
        cwd=root_of(ctx),
        env=child_environment(os.environ),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,  # its own process group, so one signal reaches all of it
    )  # fmt: skip
    assert proc.stdout is not None
    output = CappedOutput(MAX_OUTPUT)
    reading = asyncio.create_task(output.read_all(proc.stdout))
    code: int | None = None
    try:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                code = await _exited(proc)
        _kill_group(proc.pid)  # leftovers in the background, or everything on timeout
        await asyncio.wait({reading}, timeout=DRAIN_S)  # output still in the pipe
    finally:  # done, timed out or cancelled: leave no process and no reader behind
        _kill_group(proc.pid)
        reading.cancel()
        await asyncio.wait({reading})
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(DRAIN_S):
                await _exited(proc)  # reaped, so nothing is reported as still running
    if code is None:
        raise ToolError(
            f"timed out after {timeout:g} s; the command and every process it started were "
            f"killed. Output before the timeout:\n{output.text()}"
        )
    return f"exit code {code}\n{output.text()}"


async def _exited(proc: asyncio.subprocess.Process) -> int:
    """The exit code, as soon as bash itself ends. (`proc.wait()` also waits until the output
    pipe closes, which a background job holding it would put off until the timeout.)"""
    while proc.returncode is None:  # noqa: ASYNC110 (no event tells of the exit alone)
        await asyncio.sleep(0.01)
    return proc.returncode


def child_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The parent's environment without credential-named variables."""
    return {k: v for k, v in environ.items() if not _CREDENTIAL.search(k)}


class CappedOutput:
    """A stream's first and last `limit / 2` bytes, and how many bytes it had in all."""

    def __init__(self, limit: int) -> None:
        self.half = limit // 2
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    async def read_all(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(65536):
            self.add(chunk)

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = max(self.half - len(self.head), 0)
        self.head += chunk[:room]
        self.tail += chunk[room:]
        del self.tail[: -self.half or None]

    def text(self) -> str:
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        cut = self.total - len(self.head) - len(self.tail)
        if not cut:
            return head + tail
        return f"{head}\n[output cut: {cut} of {self.total} bytes omitted here]\n{tail}"


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
