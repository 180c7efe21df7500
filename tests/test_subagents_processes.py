"""Sub-agents across processes on one SQLite file: a child's undecided call suspends the child
and its parent; the CLI in another process decides it (routed to the child); a third process
resumes the parent, which finishes the child first. A parent killed mid-delegation continues
the same child run, never a second one. The models answer over real HTTP or by step."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from model_server import serve, text_reply, tool_call_reply
from support import forking

from loopstate import SQLiteStore

TESTS = Path(__file__).parent


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "LOOPSTATE_DB": str(tmp_path / "runs.db"),
        "PUBLISHED": str(tmp_path / "published.txt"),
        "PYTHONPATH": str(TESTS),
        **extra,
    }


def run(env: dict[str, str], *args: str, cwd: Path = TESTS) -> subprocess.CompletedProcess[str]:
    return forking.run(
        [sys.executable, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=120
    )


def started(env: dict[str, str]) -> dict[str, Any]:
    out = run(env, str(TESTS / "subagent_team.py"), "run")
    assert out.returncode == 0, out.stderr
    result: dict[str, Any] = json.loads(out.stdout.splitlines()[-1])
    return result


@pytest.mark.slow
async def test_a_child_call_decided_by_the_cli_elsewhere_lets_child_then_parent_finish(
    tmp_path: Path,
) -> None:
    replies = (
        tool_call_reply(("p1", "writer", {"task": "publish hi"})),  # the supervisor delegates
        tool_call_reply(("c1", "publish", {"text": "hi"})),  # the writer's gated call
        text_reply("Done."),  # the writer, once its call was approved
        text_reply("The writer published it."),  # the supervisor
    )
    with serve(*replies) as server:
        env = env_for(tmp_path, MODEL_BASE=server.openai_base)
        first = started(env)
        assert first["status"] == "awaiting_approval"
        (pending,) = first["pending"]
        assert (pending["call_id"], pending["tool"]) == ("c1", "publish")
        store = SQLiteStore(tmp_path / "runs.db")
        parent = await store.load(first["run_id"])
        child_id = parent.calls[0].child_run_id
        assert pending["run_id"] == child_id
        assert (await store.load(child_id or "")).status == "awaiting_approval"
        assert not (tmp_path / "published.txt").exists()

        loopstate = ("-m", "loopstate")
        db = ("--db", env["LOOPSTATE_DB"])
        shown = run(env, *loopstate, "runs", "show", first["run_id"], *db)
        assert shown.returncode == 0, shown.stderr
        tree = shown.stdout.split("sub-agents:")[1]
        assert f"↳ p1 writer → run {child_id}: awaiting_approval" in tree
        assert "    assistant  → c1 publish" in tree  # the child's conversation, indented
        waiting = run(env, *loopstate, "runs", "pending", *db)
        assert f'c1  publish {{"text": "hi"}}  (in run {child_id})' in waiting.stdout
        approve = run(env, *loopstate, "approve", first["run_id"], "c1", *db)
        assert approve.returncode == 0, approve.stderr
        child = await store.load(child_id or "")
        assert [q.call_id for q in child.inbox] == ["c1"]  # routed to the child run

        resumed = run(env, *loopstate, "resume", first["run_id"], "--agent",
                      "subagent_team:supervisor")  # fmt: skip
        assert resumed.returncode == 0, resumed.stderr
        assert "answer: The writer published it." in resumed.stdout
    assert (tmp_path / "published.txt").read_text() == "hi\n"
    child = await store.load(child_id or "")
    assert (child.status, child.output) == ("done", "Done.")
    assert child.calls[0].decided_by is not None
    assert child.calls[0].decided_by.startswith("cli:")
    assert len(server.requests) == 4


@pytest.mark.slow
async def test_a_parent_killed_mid_delegation_resumes_the_same_child_run(tmp_path: Path) -> None:
    mark = tmp_path / "slow-started"
    env = env_for(tmp_path, MARK=str(mark), RUN_ID="parent-1")
    child = forking.Popen(
        [sys.executable, str(TESTS / "subagent_team.py"), "run"], env=env, cwd=TESTS
    )
    try:
        deadline = time.monotonic() + 60
        while not mark.exists():
            assert time.monotonic() < deadline, "the writer's tool never started"
            assert child.poll() is None, "the run ended before the writer's tool started"
            await asyncio.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=300)
    store = SQLiteStore(tmp_path / "runs.db")
    stored = await store.load("parent-1")
    child_id = stored.calls[0].child_run_id
    assert child_id is not None
    assert stored.calls[0].status == "running"

    resumed = run({**env, "SLOW_S": "0"}, "-m", "loopstate", "resume", "parent-1", "--agent",
                  "subagent_team:supervisor")  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert "answer: The writer published it." in resumed.stdout
    runs = await store.list_runs()
    assert sorted(r.run_id for r in runs) == sorted(["parent-1", child_id])  # no second child
    continued = await store.load(child_id)
    assert continued.status == "done"
    assert continued.calls[0].status == "interrupted"  # never silently run twice
