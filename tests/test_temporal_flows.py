"""A flow run on Temporal: the coaching flow end to end (scripted models) with a worker in
another process, the user's replies and the approval sent as Updates from this one; and a
flow whose agent phase runs as a child workflow."""

from __future__ import annotations

import asyncio
import gc
import os
import sys
from pathlib import Path

import pytest
from support import forking
from support.waiting import until
from temporal_scenarios import CONTINUE_SETTINGS, coaching, kill, start_worker
from temporal_support import Served, serving, wait_pending
from temporalio.client import WorkflowFailureError

from loopstate import Approve, RunNotResumable
from loopstate.engine.state import RunState
from loopstate.machines.agent.delegation import child_run_id


async def cli(s: Served, address: str, *args: str) -> str:
    """`loopstate temporal ...` in a process of its own; its output, once it succeeded."""
    where = ["--address", address, "--task-queue", s.task_queue]
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    process = await asyncio.to_thread(
        forking.run, [sys.executable, "-m", "loopstate", "temporal", *args, *where], env=env,
        capture_output=True, timeout=120,
    )  # fmt: skip
    out, err = process.stdout, process.stderr
    assert process.returncode == 0, err.decode()
    return out.decode()


async def status_of(s: Served, run_id: str, status: str) -> RunState:
    async def reached() -> RunState | None:
        """the run reaches the status"""
        state = await s.runs.state(run_id)
        return state if state.status == status else None

    return await until(reached, every=0.05)


@pytest.mark.slow
async def test_the_coaching_flow_waits_for_the_user_and_an_approval_through_updates(
    temporal_address: str, tmp_path: Path
) -> None:
    async with serving(temporal_address, tmp_path, worker=False) as s:
        worker = start_worker(temporal_address, s)  # the workflow runs in another process
        try:
            run_id = f"coach-{s.task_queue}"
            goal = "I want to run a 4:25 1500m"
            started = await cli(s, temporal_address, "start", "coaching", goal, "--flow",
                                "--run-id", run_id)  # fmt: skip
            assert started == f"{run_id}\n"
            first = await status_of(s, run_id, "awaiting_input")
            assert first.phase == "intake"
            with pytest.raises(RunNotResumable, match="empty"):
                await s.runs.reply(run_id, "  ")
            await s.runs.reply(run_id, "43, 70 km a week, 5 days, a stress fracture last year")
            [request] = await wait_pending(s.runs, run_id)
            assert request.tool == "generate_plan"
            with pytest.raises(RunNotResumable, match="not waiting for the user"):
                await s.runs.reply(run_id, "hello?")
            await s.runs.approve(run_id, request.call_id)
            presented = await status_of(s, run_id, "awaiting_input")
            assert presented.phase == "present"
            said = await cli(s, temporal_address, "reply", run_id, "Looks great!")
            assert said == f"reply accepted for run {run_id}\n"
            result = await s.runs.flow_result(run_id)
        finally:
            kill(worker)
    assert (result.status, result.phase) == ("done", "done")
    assert result.data["answers"] == {
        "age": 43,
        "weekly_volume": 70.0,
        "injury_history": "stress fracture last year",
        "training_days": 5,
    }
    assert result.data["plan"]["title"] == "Speed base"
    assert result.data["safety"]["status"] == "approved_with_warnings"
    moves = [(t.source, t.target, t.actor) for t in result.transitions
             if t.event in ("advance", "user_replied")]  # fmt: skip
    assert moves == [
        ("goal_capture", "analyst", "flow"),
        ("analyst", "intake", "flow"),
        ("intake", "intake", "user"),
        ("intake", "safety", "flow"),
        ("safety", "plan", "flow"),
        ("plan", "present", "flow"),
        ("present", "present", moves[6][2]),
        ("present", "done", "flow"),
    ]
    assert moves[6][2].startswith("cli:")  # the reply the CLI sent
    [gate] = [t for t in result.transitions if t.target == "safety"]
    assert gate.reason == "gate: intake_complete"
    [approval] = [t for t in result.transitions if t.source == "awaiting_approval"]
    assert approval.actor == "user"


async def test_an_agent_phase_runs_as_a_child_workflow_decided_through_the_flow(
    temporal_address: str, tmp_path: Path
) -> None:
    async with serving(temporal_address, tmp_path) as s:
        run_id = await s.runs.start_flow("pipeline", "draft it", data={"topic": "hello"})
        [request] = await wait_pending(s.runs, run_id)
        child = f"{run_id}.draft.1"
        assert (request.tool, request.run_id) == ("write_note", child)
        await s.runs.decide(run_id, "nope", Approve(), wait=False)  # nothing waits for it here
        await s.runs.approve(run_id, request.call_id)
        result = await s.runs.flow_result(run_id)
        usage = await s.runs.usage(run_id)
        events = await s.runs.events(run_id)
    assert (result.status, result.data["draft"]) == ("done", "final: appended 'hello' to notes.txt")
    assert (tmp_path / "notes.txt").read_text() == "hello\n"
    assert set(usage.by_agent) == {"main", "draft"}
    [refused] = [e for e in events if e.kind == "decision_refused"]
    assert refused.call_id == "nope"  # type: ignore[union-attr]


async def test_a_sub_agent_in_a_flows_model_phase_runs_as_a_child_workflow(
    temporal_address: str, tmp_path: Path
) -> None:
    async with serving(temporal_address, tmp_path) as s:
        run_id = await s.runs.start_flow("desk", "delegate")
        [request] = await wait_pending(s.runs, run_id)
        assert request.run_id == child_run_id(run_id, "research_1")
        await s.runs.approve(run_id, request.call_id)
        result = await s.runs.flow_result(run_id)
    assert (result.status, result.phase) == ("done", "done")
    assert result.output == "final: final: appended 'hello' to notes.txt"


async def test_a_long_flow_continues_as_new_carrying_its_phase_and_data(
    temporal_address: str, tmp_path: Path
) -> None:
    async with serving(temporal_address, tmp_path, settings=CONTINUE_SETTINGS) as s:
        run_id = await coaching(s)  # replies and an approval, as in the test above
        result = await s.runs.flow_result(run_id)
        runs = [e async for e in s.client.list_workflows(f"WorkflowId = '{run_id}'")]
    assert (result.status, result.phase) == ("done", "done")
    assert result.data["plan"]["title"] == "Speed base"
    assert len(runs) >= 3  # every 2 model steps, at a step boundary
    assert [t.seq for t in result.transitions] == list(range(1, len(result.transitions) + 1))


async def test_a_flow_started_as_an_agent_fails_at_once_saying_how_to_start_it(
    temporal_address: str, tmp_path: Path
) -> None:
    async with serving(temporal_address, tmp_path) as s:
        run_id = await s.runs.start("coaching", "hello")
        with pytest.raises(WorkflowFailureError) as failed:
            await s.runs.result(run_id)
    gc.collect()  # the failed workflow's leftovers go now, not during another test
    assert "'coaching' is a flow, not an agent: start it as a flow" in str(failed.value.cause)
