"""`loopstate temporal ...` and `loopstate diagram --run` against runs on a real dev server."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

from support import forking
from support.waiting import until
from temporal_support import connect

AGENT_MODULE = '''
from loopstate import Agent, MemoryStore, ScriptedModel, tool
from loopstate.engine.models.scripted import call

@tool(needs_approval=True)
def shout(text: str) -> str:
    """Shout."""
    return text.upper() + "\\x1b[2J"

writer = Agent(
    ScriptedModel([call("shout", {"text": "hi\\x1b[31m"}, id="c1"),
                   lambda r: "said " + str(r.messages[-1].content)], by_step=True),
    [shout], store=MemoryStore(),
)
'''


async def cli(*args: str, cwd: Path) -> tuple[int, str, str]:
    env = {**os.environ, "PYTHONPATH": str(cwd), "PYTHONWARNINGS": "ignore"}
    done = await asyncio.to_thread(
        forking.run, [sys.executable, "-m", "loopstate", *args], cwd=cwd, env=env,
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    return done.returncode, done.stdout, done.stderr


async def test_the_cli_serves_starts_lists_decides_and_shows_a_temporal_run(
    temporal_address: str, tmp_path: Path
) -> None:
    (tmp_path / "cli_agent.py").write_text(AGENT_MODULE)
    where = ["--address", temporal_address, "--task-queue", "cli-q"]
    worker = forking.Popen(
        [sys.executable, "-m", "loopstate", "temporal", "worker",
         "--agent", "writer=cli_agent:writer", *where],
        cwd=tmp_path, stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(tmp_path), "PYTHONWARNINGS": "ignore"},
    )  # fmt: skip
    try:
        assert worker.stderr is not None
        assert b"serving writer" in await asyncio.to_thread(worker.stderr.readline)
        code, out, _ = await cli(
            "temporal", "start", "writer", "say hi", "--run-id", "cli-1", "--wait", *where,
            cwd=tmp_path,
        )  # fmt: skip
        assert (code, out) == (0, "cli-1\ncli-1: awaiting_approval\n")

        async def listed() -> str:
            """cli-1's call, once the inbox (eventually consistent) lists it: the server is
            the run's, other tests' calls are listed too"""
            _, out, _ = await cli("temporal", "pending", *where, cwd=tmp_path)
            return next((line for line in out.splitlines() if line.startswith("cli-1 ")), "")

        line = await until(listed, every=0.1)
        assert line.startswith('cli-1  c1  shout {"text": "hi\\u001b[31m"}')  # escaped
        code, _, err = await cli("temporal", "approve", "cli-1", "nope", *where, cwd=tmp_path)
        assert code == 2
        assert err == "loopstate temporal approve: run cli-1 has no call nope to decide " \
            "(pending: c1)\n"  # fmt: skip
        code, out, _ = await cli("temporal", "approve", "cli-1", "c1", *where, cwd=tmp_path)
        assert (code, out) == (0, "approve accepted for c1 of run cli-1\n")
        client = await connect(temporal_address)
        await client.get_workflow_handle("cli-1").result()
        code, out, _ = await cli("temporal", "show", "cli-1", *where, cwd=tmp_path)
        assert out.startswith("run cli-1 (agent): done, ")
        assert "said HI\\x1b[31M\\x1b[2J" in out  # the answer, escaped
        assert "by cli:" in out
        code, out, _ = await cli(
            "diagram", "--run", "cli-1", "--db", f"temporal://{temporal_address}", cwd=tmp_path
        )
        assert code == 0
        assert "awaiting_approval" in out
    finally:
        worker.send_signal(signal.SIGKILL)
        await asyncio.to_thread(worker.wait)
        worker.stderr.close()


async def test_the_cli_says_in_one_line_when_no_server_answers(tmp_path: Path) -> None:
    code, _, err = await cli("temporal", "pending", "--address", "127.0.0.1:1", cwd=tmp_path)
    assert code == 2
    assert err.startswith("loopstate temporal pending: ")
    assert err.count("\n") == 1
