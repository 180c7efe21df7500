"""Sub-agents on Temporal: each call of `Agent.as_tool` runs as a child workflow; its gated
call is listed and decided through the parent; an abort cascades; usage rolls up; a worker
SIGKILLed while the child's tool runs loses nothing and runs the tool once."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.waiting import until
from temporal_scenarios import CRASH_SETTINGS, kill, start_worker
from temporal_support import serving, wait_pending
from temporalio.api.enums.v1 import EventType

from loopstate import Abort, Approve, DecisionError
from loopstate.engine.result import RunResult
from loopstate.machines.agent.delegation import child_run_id


async def test_a_sub_agents_gated_call_is_decided_through_the_parent(
    temporal_address: str, tmp_path: Path
) -> None:
    async with serving(temporal_address, tmp_path) as s:
        run_id = await s.runs.start("boss", "delegate a note")
        [request] = await wait_pending(s.runs, run_id)
        child = child_run_id(run_id, "research_1")
        assert (request.call_id, request.tool, request.run_id) == ("note_1", "write_note", child)

        async def listed() -> list[str]:
            """the inbox lists the sub-agent's call"""
            calls = await s.runs.inbox()
            return [
                c.run_id for c in calls if c.call_id == "note_1" and c.run_id in (run_id, child)
            ]

        assert await until(listed, every=0.05) == [run_id]  # once, under its top run
        with pytest.raises(DecisionError, match="text"):
            await s.runs.edit(run_id, "note_1", {"path": "notes.txt", "text": 42})
        await s.runs.approve(run_id, "note_1")
        result = await s.runs.result(run_id)
        usage = await s.runs.usage(run_id)
        handle = s.client.get_workflow_handle(child, result_type=RunResult)
        child_result = await handle.result()
    assert result.status == "done"
    assert result.output == "final: final: appended 'hello' to notes.txt"
    assert (tmp_path / "notes.txt").read_text() == "hello\n"
    assert child_result.status == "done"
    assert child_result.transitions[2].actor == "user"  # decided through the parent
    assert set(usage.by_agent) == {"main", "research"}
    assert usage.total == usage.own + usage.by_agent["research"]


async def test_a_sub_agents_sub_agent_is_decided_through_the_top_run(
    temporal_address: str, tmp_path: Path
) -> None:
    async with serving(temporal_address, tmp_path) as s:
        run_id = await s.runs.start("chief", "delegate a note, twice down")
        [request] = await wait_pending(s.runs, run_id)
        below = child_run_id(child_run_id(run_id, "team_1"), "research_1")
        assert (request.call_id, request.run_id) == ("note_1", below)
        await s.runs.decide(run_id, "note_1", Approve(), wait=False)  # a Signal, routed too
        result = await s.runs.result(run_id)
        usage = await s.runs.usage(run_id)
    assert result.output == "final: final: final: appended 'hello' to notes.txt"
    assert set(usage.by_agent) == {"main", "team", "research"}


async def test_aborting_the_parent_aborts_the_sub_agent_it_waits_for(
    temporal_address: str, tmp_path: Path
) -> None:
    async with serving(temporal_address, tmp_path) as s:
        run_id = await s.runs.start("boss", "delegate a note")
        await wait_pending(s.runs, run_id)
        await s.runs.abort(run_id, "changed my mind")
        result = await s.runs.result(run_id)
        child = child_run_id(run_id, "research_1")
        handle = s.client.get_workflow_handle(child, result_type=RunResult)
        child_result = await handle.result()
    assert result.status == "aborted"
    assert child_result.status == "aborted"
    assert "changed my mind" in (child_result.stop_reason or "")
    assert not (tmp_path / "notes.txt").exists()


async def test_an_abort_of_the_sub_agents_call_given_to_the_parent_aborts_the_tree(
    temporal_address: str, tmp_path: Path
) -> None:
    async with serving(temporal_address, tmp_path) as s:
        run_id = await s.runs.start("boss", "delegate a note")
        await wait_pending(s.runs, run_id)
        await s.runs.decide(run_id, "note_1", Abort("not this note"))
        result = await s.runs.result(run_id)
    assert result.status == "aborted"
    assert "sub-agent research" in (result.stop_reason or "")
    assert "not this note" in (result.stop_reason or "")
    assert not (tmp_path / "notes.txt").exists()


@pytest.mark.slow
async def test_a_worker_killed_while_the_child_runs_loses_nothing_and_runs_the_tool_once(
    temporal_address: str, tmp_path: Path
) -> None:
    async with serving(temporal_address, tmp_path, settings=CRASH_SETTINGS, worker=False) as s:
        first = start_worker(temporal_address, s)
        try:
            run_id = await s.runs.start("delegator", "append once")
            effects = tmp_path / "effects.txt"
            await until(lambda: effects.exists() and effects.read_text())  # inside the tool
        finally:
            kill(first)
        second = start_worker(temporal_address, s)
        try:
            result = await s.runs.result(run_id)
        finally:
            kill(second)
    assert (tmp_path / "effects.txt").read_text() == "once\n"
    assert result.status == "done"
    assert "interrupted, outcome unknown" in (result.output or "")


async def test_aborting_the_parent_while_its_sub_agent_runs_aborts_both_at_the_next_boundary(
    temporal_address: str, tmp_path: Path
) -> None:
    async with serving(temporal_address, tmp_path) as s:
        run_id = await s.runs.start("delegator", "append once")
        effects = tmp_path / "effects.txt"
        await until(lambda: effects.exists() and effects.read_text())  # the child's tool runs
        await s.runs.abort(run_id, "stop everything")
        child = child_run_id(run_id, "slow_work_1")
        handle = s.client.get_workflow_handle(child, result_type=RunResult)

        async def told() -> bool:
            """the parent's abort reached the child (a Signal after the parent's Update: a
            child let go before it came could end its work first)"""
            history = await handle.fetch_history()
            return any(
                e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
                and e.workflow_execution_signaled_event_attributes.signal_name == "abort"
                for e in history.events
            )

        await until(told, every=0.05)
        (tmp_path / "release").touch()  # the tool in flight finishes; nothing runs after it
        result = await s.runs.result(run_id)
        child_result = await handle.result()
    assert (result.status, child_result.status) == ("aborted", "aborted")
    assert "stop everything" in (child_result.stop_reason or "")
    assert child_result.steps == 1  # no model call after the abort


async def test_a_sub_agent_terminated_by_an_operator_fails_its_call_and_the_parent_goes_on(
    temporal_address: str, tmp_path: Path
) -> None:
    async with serving(temporal_address, tmp_path) as s:
        run_id = await s.runs.start("boss", "delegate a note")
        await wait_pending(s.runs, run_id)
        child = child_run_id(run_id, "research_1")
        await s.client.get_workflow_handle(child).terminate("operator cleanup")
        result = await s.runs.result(run_id)
    assert result.status == "done"
    assert (result.output or "").startswith(
        f"final: Error: sub-agent research (run {child}) failed"
    )
    assert "closed without ending the run" in (result.output or "")
