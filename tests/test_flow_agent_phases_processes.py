"""Pipelines across processes on one SQLite file: an agent phase's undecided call suspends the
flow; the CLI in another process decides it (given to the flow's run, routed to the phase's
run); a third process resumes the flow, which finishes the phase's run and then the flow. A
flow killed mid-phase continues the same child run, and nothing runs twice."""

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
from support import forking

from loopstate import SQLiteStore

TESTS = Path(__file__).parent
LOOPSTATE = (sys.executable, "-m", "loopstate")


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    (tmp_path / "ws").mkdir(exist_ok=True)
    return {
        **os.environ,
        "LOOPSTATE_DB": str(tmp_path / "runs.db"),
        "WORKSPACE": str(tmp_path / "ws"),
        "PYTHONPATH": str(TESTS),
        **extra,
    }


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    done = forking.run(args, capture_output=True, text=True, env=env, cwd=TESTS, timeout=120)
    assert done.returncode == 0, done.stderr
    return done


@pytest.mark.slow
async def test_a_phase_call_decided_by_the_cli_elsewhere_lets_the_phase_then_the_flow_finish(
    tmp_path: Path,
) -> None:
    env = env_for(tmp_path)
    out = run(env, sys.executable, str(TESTS / "gauntlet_team.py"), "run")
    first: dict[str, Any] = json.loads(out.stdout.splitlines()[-1])
    assert (first["status"], first["phase"]) == ("awaiting_approval", "write")
    (pending,) = first["pending"]
    store = SQLiteStore(tmp_path / "runs.db")
    flow = await store.load("gauntlet-1")
    assert flow.flow is not None
    assert pending["run_id"] == flow.flow.child
    assert not (tmp_path / "ws" / "piece.md").exists()

    db = ("--db", env["LOOPSTATE_DB"])
    shown = run(env, *LOOPSTATE, "runs", "show", "gauntlet-1", *db)
    assert f"↳ phase write → run {flow.flow.child}: awaiting_approval" in shown.stdout
    run(env, *LOOPSTATE, "approve", "gauntlet-1", pending["call_id"], *db)
    child = await store.load(pending["run_id"])
    assert [q.call_id for q in child.inbox] == [pending["call_id"]]  # routed to the phase's run

    resumed = run(env, *LOOPSTATE, "resume", "gauntlet-1", "--agent", "gauntlet_team:flow", *db)
    assert "done" in resumed.stdout
    final = await store.load("gauntlet-1")
    assert (final.status, final.phase) == ("done", "done")
    assert final.flow is not None
    assert len(final.flow.children) == 3
    assert (tmp_path / "ws" / "piece.md").read_text() == "Tides follow the moon."
    child = await store.load(pending["run_id"])
    assert child.status == "done"
    write = next(c for c in child.calls if c.tool == "write")
    assert write.decided_by is not None
    assert write.decided_by.startswith("cli:")


@pytest.mark.slow
async def test_a_flow_killed_mid_phase_resumes_the_same_child_run(tmp_path: Path) -> None:
    mark = tmp_path / "slow-started"
    env = env_for(tmp_path, MARK=str(mark))
    process = forking.Popen(
        [sys.executable, str(TESTS / "gauntlet_team.py"), "run"], env=env, cwd=TESTS
    )
    try:
        deadline = time.monotonic() + 60
        while not mark.exists():
            assert time.monotonic() < deadline, "the writer's tool never started"
            assert process.poll() is None, "the run ended before the writer's tool started"
            await asyncio.sleep(0.05)
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.wait(timeout=300)
    store = SQLiteStore(tmp_path / "runs.db")
    stored = await store.load("gauntlet-1")
    assert stored.flow is not None
    child_id = stored.flow.child
    assert child_id is not None

    db = ("--db", env["LOOPSTATE_DB"])
    resumed = {**env, "SLOW_S": "0"}
    run(resumed, *LOOPSTATE, "resume", "gauntlet-1", "--agent", "gauntlet_team:flow", *db)
    final = await store.load("gauntlet-1")
    assert final.status == "done"
    assert final.flow is not None
    assert final.flow.children[0] == child_id  # the same child, not a second one
    assert len(final.flow.children) == 3
    continued = await store.load(child_id)
    assert continued.status == "done"
    assert continued.calls[0].status == "interrupted"  # never silently run twice
    assert mark.read_text() == "started\n"
    listed = {r.run_id for r in await store.list_runs()}
    assert listed == {"gauntlet-1", *final.flow.children}
