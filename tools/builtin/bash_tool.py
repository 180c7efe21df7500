"""`bash`: run a shell command in the workspace, and leave none of its processes behind.

The command is the model's own shell text, passed to `/bin/bash -c` as one argument: the
library never builds a shell string out of other values. It runs with the workspace as working
directory, no stdin, and the parent's environment minus variables named like credentials
(`*_API_KEY`, `*_TOKEN`, `*SECRET*`, ...), so a command such as `env` cannot put them into the
run's history.

It runs under `shell_supervisor`, a small process that is a child subreaper: every process the
command starts, those that detach with `setsid` or a double fork included, stays below it and
is killed (SIGKILL, which no process can ignore) when bash exits — background jobs do not
outlive the command — on timeout, and when the call is cancelled. Should a process survive,
or the system not let detached processes be kept in the tree, the result says so.

Output (stdout and stderr interleaved) is read in bounded memory and cut by the executor's one
policy (`loopstate.engine.truncation`): its start and its end, with a note of what was cut.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import json
import os
import re
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from loopstate.engine.tool import ToolContext
from loopstate.engine.truncation import HeadTail
from loopstate.tools.builtin.shell_supervisor import KILL_S
from loopstate.tools.builtin.workspace import ToolError, root_of
from loopstate.tools.decorator import tool

MAX_RESULT_CHARS = 20_000
OUTPUT_CHARS = MAX_RESULT_CHARS - 1_000  # room for the exit line and notes: cut once, not twice
MAX_TIMEOUT = 600.0
STOP_S = KILL_S + 1.0  # how long the supervisor has to end everything once told to
DRAIN_S = 1.0  # how long output still in the pipe is read once the supervisor is gone
SUPERVISOR = Path(__file__).with_name("shell_supervisor.py")
_CREDENTIAL = re.compile(
    r"(^|_)(API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)(_|$)", re.IGNORECASE
)


@tool(needs_approval=True, category="shell", max_result_chars=MAX_RESULT_CHARS)
async def bash(
    ctx: ToolContext[Any],
    command: str,
    timeout: Annotated[float, Field(gt=0, le=MAX_TIMEOUT)] = 120.0,  # noqa: ASYNC109 (the model sets it)
) -> str:
    """Run a bash command with the workspace as its working directory; returns the exit code
    and the output. Processes it leaves running are stopped when the command ends.

    Args:
        command: the command line, run by /bin/bash -c
        timeout: seconds before the command and every process it started are killed
    """
    if not command.strip():
        raise ToolError("the command is empty")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-I", "-S", str(SUPERVISOR), command,
        cwd=root_of(ctx),
        env=child_environment(os.environ),
        stdin=asyncio.subprocess.PIPE,  # the control pipe: closing it ends everything
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,  # the supervisor's report
        start_new_session=True,
    )  # fmt: skip
    assert proc.stdout is not None
    assert proc.stderr is not None
    output = Output(OUTPUT_CHARS)
    reading = asyncio.create_task(output.read_all(proc.stdout))
    reporting = asyncio.create_task(proc.stderr.read())
    timed_out = False
    try:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await _exited(proc)
        timed_out = proc.returncode is None
    finally:  # done, timed out or cancelled: leave no process and no reader behind
        await _stop(proc)
        await asyncio.wait({reading, reporting}, timeout=DRAIN_S)
        for task in (reading, reporting):
            task.cancel()
        await asyncio.wait({reading, reporting})
    report = Report.parse(reporting)
    if report is None:
        raise ToolError(f"the command could not be supervised; {_stderr(reporting)}")
    if not report.subreaper:  # without /proc nor a subreaper: at least its process group
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    if timed_out or report.status is None:
        raise ToolError(
            f"timed out after {timeout:g} s; {report.cleanup()}. "
            f"Output before the timeout:\n{output.text()}"
        )
    code = os.waitstatus_to_exitcode(report.status)
    note = "" if report.clean else f"\n[{report.cleanup()}]"
    return f"exit code {code}\n{output.text()}{note}"


def child_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The parent's environment without credential-named variables."""
    return {k: v for k, v in environ.items() if not _CREDENTIAL.search(k)}


@dataclass(frozen=True, kw_only=True)
class Report:
    """What the supervisor says once everything has ended (see `shell_supervisor`)."""

    status: int | None
    survivors: list[int]
    subreaper: bool

    @classmethod
    def parse(cls, task: asyncio.Task[bytes]) -> Report | None:
        if task.cancelled() or task.exception() is not None:
            return None
        lines = task.result().decode("utf-8", "replace").strip().splitlines()
        try:
            data = json.loads(lines[-1])
            return cls(
                status=data["status"],
                survivors=[int(pid) for pid in data["survivors"]],
                subreaper=bool(data["subreaper"]),
            )
        except (IndexError, ValueError, KeyError, TypeError):
            return None

    @property
    def clean(self) -> bool:
        return self.subreaper and not self.survivors

    def cleanup(self) -> str:
        """What happened to the command's processes, said plainly."""
        if self.survivors:
            pids = ", ".join(map(str, self.survivors))
            return f"{len(self.survivors)} of its processes could not be killed (pids {pids})"
        if not self.subreaper:
            return (
                "its processes were killed, but this system cannot track processes that "
                "detach (setsid, daemons): any such process may still run"
            )
        return "the command and every process it started were killed"


class Output:
    """A byte stream decoded as UTF-8 (undecodable bytes as U+FFFD), its head and tail kept."""

    def __init__(self, limit: int) -> None:
        self.kept = HeadTail(limit)
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    async def read_all(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(65536):
            self.kept.add(self.decoder.decode(chunk))

    def text(self) -> str:
        self.kept.add(self.decoder.decode(b"", final=True))
        self.decoder.reset()
        return self.kept.render()


async def _exited(proc: asyncio.subprocess.Process) -> int:
    """The exit code, as soon as the supervisor ends. (`proc.wait()` may also wait for the
    output pipe to close, which a process that could not be killed would put off.)"""
    while proc.returncode is None:  # noqa: ASYNC110 (no event tells of the exit alone)
        await asyncio.sleep(0.01)
    return proc.returncode


async def _stop(proc: asyncio.subprocess.Process) -> None:
    """Tell the supervisor to end everything (close its control pipe) and wait for it; if it
    does not end in time, kill its process group, the most that is left to do."""
    if proc.stdin is not None:
        proc.stdin.close()
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(STOP_S):
            await _exited(proc)
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(DRAIN_S):
                await _exited(proc)  # reaped, so nothing is reported as still running


def _stderr(task: asyncio.Task[bytes]) -> str:
    if task.cancelled() or task.exception() is not None:
        return "it wrote nothing"
    text = task.result().decode("utf-8", "replace").strip()
    return f"it said: {text[-2000:]}" if text else "it wrote nothing"
