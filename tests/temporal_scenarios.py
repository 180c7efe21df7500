"""Representative Temporal runs: tested, and recorded as the histories the replay test checks
(`python tests/record_temporal_histories.py` writes them to tests/temporal_histories/)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from support import forking
from support.waiting import until
from temporal_support import Served, wait_pending

from loopstate.temporal import RunSettings

HERE = Path(__file__).parent
Scenario = Callable[[Served], Awaitable[str]]


async def approve(s: Served) -> str:
    run_id = await s.runs.start("writer", "note hello", run_id="approve")
    await wait_pending(s.runs, run_id)
    await s.runs.approve(run_id, "note_1")
    await s.runs.result(run_id)
    return run_id


async def deny(s: Served) -> str:
    run_id = await s.runs.start("writer", "note hello", run_id="deny")
    await wait_pending(s.runs, run_id)
    await s.runs.deny(run_id, "note_1", "not today")
    await s.runs.result(run_id)
    return run_id


async def edit(s: Served) -> str:
    run_id = await s.runs.start("writer", "note hello", run_id="edit")
    await wait_pending(s.runs, run_id)
    await s.runs.edit(run_id, "note_1", {"path": "notes.txt", "text": "edited"})
    await s.runs.result(run_id)
    return run_id


async def abort(s: Served) -> str:
    run_id = await s.runs.start("writer", "note hello", run_id="abort")
    await wait_pending(s.runs, run_id)
    await s.runs.abort(run_id, "changed my mind")
    await s.runs.result(run_id)
    return run_id


async def partial_batch(s: Served) -> str:
    run_id = await s.runs.start("batch", "two notes", run_id="partial_batch")
    await wait_pending(s.runs, run_id, 2)
    await s.runs.approve(run_id, "note_a")
    await wait_pending(s.runs, run_id, 1)
    await s.runs.deny(run_id, "note_b", "only A")
    await s.runs.result(run_id)
    return run_id


async def sub_agent(s: Served) -> str:
    """A sub-agent's gated call, decided through its parent (two workflows: parent, child)."""
    run_id = await s.runs.start("boss", "delegate a note", run_id="sub_agent")
    await wait_pending(s.runs, run_id)
    await s.runs.approve(run_id, "note_1")
    await s.runs.result(run_id)
    return run_id


async def flow_agent_phase(s: Served) -> str:
    """A flow whose agent phase runs as a child workflow, its call decided through the flow."""
    run_id = await s.runs.start_flow(
        "pipeline", "draft", data={"topic": "x"}, run_id="flow_agent_phase"
    )
    await wait_pending(s.runs, run_id)
    await s.runs.approve(run_id, "note_1")
    await s.runs.flow_result(run_id)
    return run_id


async def coaching(s: Served) -> str:
    """The coaching flow: two replies from the user and an approval."""
    run_id = await s.runs.start_flow("coaching", "I want to run a 4:25 1500m", run_id="coaching")
    await until(lambda: _status(s, run_id, "awaiting_input"))
    await s.runs.reply(run_id, "43, 70 km a week, 5 days, a stress fracture last year")
    [request] = await wait_pending(s.runs, run_id)
    await s.runs.approve(run_id, request.call_id)
    await until(lambda: _status(s, run_id, "awaiting_input"))
    await s.runs.reply(run_id, "Looks great!")
    await s.runs.flow_result(run_id)
    return run_id


async def _status(s: Served, run_id: str, status: str) -> bool:
    return (await s.runs.state(run_id)).status == status


CONTINUE_SETTINGS = RunSettings(continue_after_steps=2)


async def continue_as_new(s: Served) -> str:
    """Needs a `Served` whose runs use `CONTINUE_SETTINGS`."""
    run_id = await s.runs.start("looper", "look five keys up", run_id="continue_as_new")
    await s.runs.result(run_id)
    return run_id


CRASH_SETTINGS = RunSettings(heartbeat_s=2)


def start_worker(address: str, s: Served, *extra: str) -> subprocess.Popen[str]:
    """A worker process serving `temporal_agents` on `s`'s task queue, once it polls."""
    script = str(HERE / "temporal_worker.py")
    worker = forking.Popen(
        [sys.executable, script, address, str(s.workdir), s.task_queue, *extra],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert worker.stdout is not None
    line = worker.stdout.readline()
    assert line.strip() == "ready", f"worker said {line!r}"
    return worker


def kill(worker: subprocess.Popen[str]) -> None:
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    if worker.stdout is not None:
        worker.stdout.close()


async def crash_mid_tool(s: Served, address: str, run_id: str = "crash_mid_tool") -> str:
    """A worker is SIGKILLed while a non-idempotent tool runs; a new one finishes the run
    (needs `CRASH_SETTINGS`, and `s` without a worker of its own)."""
    first = start_worker(address, s)
    try:
        run_id = await s.runs.start("slow", "append once", run_id=run_id)
        effects = s.workdir / "effects.txt"
        await until(lambda: effects.exists() and effects.read_text())  # inside the tool
    finally:
        kill(first)
    second = start_worker(address, s)
    try:
        await s.runs.result(run_id)
    finally:
        kill(second)
    return run_id


async def crash_mid_approval(s: Served, address: str, run_id: str = "crash_mid_approval") -> str:
    """A worker is SIGKILLed while the run waits for a decision; a new one takes the decision
    (an Update needs a live worker) and finishes the run."""
    first = start_worker(address, s)
    try:
        run_id = await s.runs.start("writer", "note hello", run_id=run_id)
        await wait_pending(s.runs, run_id)
    finally:
        kill(first)
    second = start_worker(address, s)
    try:
        await s.runs.approve(run_id, "note_1")
        await s.runs.result(run_id)
    finally:
        kill(second)
    return run_id
