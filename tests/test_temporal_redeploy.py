"""A changed agent meets a workflow in flight: a tool call its worker's agent can no longer
run fails the activity for good (`IncompatibleRun`, non-retryable) and the run ends `failed`
once, with the reason, never a workflow task failing in a loop; the tool never runs."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import cast

import pytest
from support.waiting import until
from temporal_agents import agents, noting
from temporal_support import serving, wait_pending
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from loopstate import Agent, ApprovalRequest, Flow, ScriptedModel
from loopstate.engine.state import CallRecord
from loopstate.temporal import TemporalRuns, agent_worker
from loopstate.temporal.activities import run_tool
from loopstate.temporal.catalog import serve
from loopstate.temporal.data import ToolCallRun


def redeployed(workdir: Path) -> None:
    """The worker's `writer` as a later deploy serves it: without `write_note`."""
    writer = agents(workdir)["writer"]
    serve({"writer": writer.clone(tools=[t for t in writer.tools if t.name != "write_note"])})


async def test_a_call_whose_tool_the_served_agent_lost_fails_the_activity_for_good(
    tmp_path: Path,
) -> None:
    redeployed(tmp_path)
    arguments = {"path": "notes.txt", "text": "hi"}
    record = CallRecord(
        call_id="note_1", tool="write_note", raw_arguments="{}", arguments=arguments,
        status="approved",
    )  # fmt: skip
    with pytest.raises(ApplicationError) as failed:
        await ActivityEnvironment().run(
            run_tool, ToolCallRun(agent="writer", run_id="run-1", record=record)
        )
    assert (failed.value.type, failed.value.non_retryable) == ("IncompatibleRun", True)
    assert failed.value.message == (
        "run run-1 cannot resume under this definition (nothing was changed): the served "
        "agent lacks tool write_note, which call note_1 needs"
    )


async def test_a_run_in_flight_fails_once_when_its_approved_tool_was_deployed_away(
    temporal_address: str, tmp_path: Path
) -> None:
    async with serving(temporal_address, tmp_path) as s:
        run_id = await s.runs.start("writer", "note hello")
        await wait_pending(s.runs, run_id)
        redeployed(tmp_path)  # the workflow stays cached; its next activity meets the deploy
        await s.runs.approve(run_id, "note_1")
        result = await s.runs.result(run_id)
        history = await s.client.get_workflow_handle(run_id).fetch_history()
    assert result.status == "failed"
    lost = "the served agent lacks tool write_note, which call note_1 needs"
    assert lost in (result.error or "")
    kinds = [e.WhichOneof("attributes") for e in history.events]
    assert "workflow_task_failed_event_attributes" not in kinds
    assert kinds.count("activity_task_scheduled_event_attributes") == 2  # model, tool: no retry
    assert not (tmp_path / "notes.txt").exists()


def _writer_v2(workdir: Path, change: str) -> dict[str, Agent | Flow]:
    """`writer` as a later deploy serves it: `write_note` removed, or no longer gated."""
    writer = agents(workdir)["writer"]
    assert isinstance(writer, Agent)
    kept = [t for t in writer.tools if t.name != "write_note"]
    if change == "ungated":
        note = next(t for t in writer.tools if t.name == "write_note")
        kept.append(dataclasses.replace(note, needs_approval=False))
    return {"writer": writer.clone(tools=kept)}


@pytest.mark.parametrize(
    ("change", "status"), [("removed", "failed"), ("ungated", "done")], ids=["removed", "ungated"]
)
async def test_a_replay_under_a_changed_agent_never_fails_the_workflow_task(
    temporal_address: str, tmp_path: Path, change: str, status: str
) -> None:
    """The run waits under v1; a fresh worker serving v2 (no cache: every task replays the
    history) takes the decision: the calls keep the gating recorded with the model's reply."""
    async with serving(temporal_address, tmp_path, worker=False) as s:
        queue = s.task_queue
        async with agent_worker(s.client, agents(tmp_path), task_queue=queue):
            run_id = await s.runs.start("writer", "note hello")
            await wait_pending(s.runs, run_id)
        v2 = _writer_v2(tmp_path, change)
        async with agent_worker(s.client, v2, task_queue=queue, max_cached_workflows=0):
            await s.runs.approve(run_id, "note_1")
            result = await s.runs.result(run_id)
        history = await s.client.get_workflow_handle(run_id).fetch_history()
    kinds = [e.WhichOneof("attributes") for e in history.events]
    assert "workflow_task_failed_event_attributes" not in kinds
    assert result.status == status
    if change == "removed":
        assert "the served agent lacks tool write_note, which call note_1 needs" in (
            result.error or ""
        )
        assert not (tmp_path / "notes.txt").exists()
    else:
        assert (tmp_path / "notes.txt").read_text() == "hello\n"


async def test_a_replay_past_a_tool_activity_whose_tool_was_deployed_away_makes_its_commands(
    temporal_address: str, tmp_path: Path
) -> None:
    """`twice` ran one approved note under v1 and waits for its second; v2 lacks the tool:
    the replay schedules the first call's activity as it was (its result is in the history),
    and the second call's activity fails the run once."""
    async with serving(temporal_address, tmp_path, worker=False) as s:
        queue = s.task_queue
        async with agent_worker(s.client, agents(tmp_path), task_queue=queue):
            run_id = await s.runs.start("twice", "two notes")
            await wait_pending(s.runs, run_id)
            await s.runs.approve(run_id, "note_1")
            [second] = await wait_pending_call(s.runs, run_id, "note_2")
        twice = agents(tmp_path)["twice"]
        assert isinstance(twice, Agent)
        v2 = {"twice": twice.clone(tools=[t for t in twice.tools if t.name != "write_note"])}
        async with agent_worker(s.client, v2, task_queue=queue, max_cached_workflows=0):
            await s.runs.approve(run_id, second.call_id)
            result = await s.runs.result(run_id)
        history = await s.client.get_workflow_handle(run_id).fetch_history()
    kinds = [e.WhichOneof("attributes") for e in history.events]
    assert "workflow_task_failed_event_attributes" not in kinds
    assert result.status == "failed"
    assert "lacks tool write_note, which call note_2 needs" in (result.error or "")
    assert (tmp_path / "notes.txt").read_text() == "hello\n"  # the first note, run once


async def wait_pending_call(runs: TemporalRuns, run_id: str, call_id: str) -> list[ApprovalRequest]:
    """The run's pending calls once `call_id` is among them."""

    async def pending() -> list[ApprovalRequest]:
        """the run's pending calls, once `call_id` waits"""
        calls = await runs.pending(run_id)
        return calls if any(c.call_id == call_id for c in calls) else []

    return await until(pending, every=0.05)


async def test_a_flow_phase_replayed_under_an_ungated_tool_keeps_its_recorded_gate(
    temporal_address: str, tmp_path: Path
) -> None:
    """The flow `noting` waits at its phase's gated call under v1; v2 no longer gates
    `write_note`: a fresh worker replays, takes the approval and finishes the flow."""
    async with serving(temporal_address, tmp_path, worker=False) as s:
        queue = s.task_queue
        async with agent_worker(s.client, agents(tmp_path), task_queue=queue):
            run_id = await s.runs.start_flow("noting", "note hello")
            await wait_pending(s.runs, run_id)
        v1 = agents(tmp_path)["noting"]
        assert isinstance(v1, Flow)
        phase = v1.phases["work"]
        assert phase.model is not None
        tools = [dataclasses.replace(t, needs_approval=False) for t in phase.tools.values()]
        v2 = {"noting": noting(tools, cast(ScriptedModel, phase.model))}
        async with agent_worker(s.client, v2, task_queue=queue, max_cached_workflows=0):
            await s.runs.approve(run_id, "note_1")
            result = await s.runs.flow_result(run_id)
        history = await s.client.get_workflow_handle(run_id).fetch_history()
    kinds = [e.WhichOneof("attributes") for e in history.events]
    assert "workflow_task_failed_event_attributes" not in kinds
    assert result.status == "done"
    assert (tmp_path / "notes.txt").read_text() == "hello\n"
