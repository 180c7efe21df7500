"""A sub-agent's child workflow at the tree's budget rests with its parent on Temporal: the
parent's resume with a raised budget (refused while too low, nothing changed) continues the
same child run; a history from before children rested replays as it ran."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from temporal_limits_agents import agents, replays, served, state_is
from temporal_support import connect
from temporalio import workflow
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from loopstate import Budget, RunNotResumable
from loopstate.temporal import AgentWorkflow, TemporalRuns
from loopstate.temporal.activities import complete_model, run_tool
from loopstate.temporal.catalog import serve


async def test_a_sub_agents_child_workflow_at_the_budget_rests_with_its_parent_and_goes_on_raised(
    temporal_address: str, tmp_path: Path
) -> None:
    async with served(temporal_address, tmp_path) as runs:
        run_id = await runs.start("treed_tight", "research")
        stopped = await state_is(runs, run_id, "budget_exceeded")
        [call] = stopped.batch
        assert call.status == "awaiting"  # waits for its child
        assert call.child_run_id is not None
        child = await state_is(runs, call.child_run_id, "budget_exceeded")  # rests, not failed
        assert stopped.failure is not None
        assert stopped.failure.budget is not None
        assert (stopped.failure.budget.limit, stopped.failure.budget.spent.model_calls) == (
            "model_calls",
            2,  # its own call and its child's first
        )
        assert (tmp_path / "lookups.txt").read_text() == "k1\n"
        with pytest.raises(RunNotResumable, match="still over its budget: budget model_calls"):
            await runs.resume(run_id, budget=Budget(model_calls=2))
        assert (await runs.state(run_id)).transitions == stopped.transitions  # nothing changed
        assert (await runs.state(call.child_run_id)).transitions == child.transitions
        await runs.resume(run_id, budget=Budget(model_calls=4))
        result = await runs.result(run_id)
        below = await runs.result(call.child_run_id)
        await replays(runs, run_id)
        await replays(runs, call.child_run_id)
    assert (result.status, result.output) == ("done", "final: final: value of k1")
    assert (below.status, below.output) == ("done", "final: value of k1")  # the same run went on
    assert below.steps == 2
    parent_path = [(t.source, t.target, t.event) for t in result.transitions]
    assert ("budget_exceeded", "awaiting_approval", "budget_raised") in parent_path
    child_path = [(t.source, t.target, t.event) for t in below.transitions]
    assert ("thinking", "budget_exceeded", "over_budget") in child_path
    assert ("budget_exceeded", "thinking", "budget_raised") in child_path
    assert (tmp_path / "lookups.txt").read_text() == "k1\n"


async def test_a_child_that_failed_at_the_budget_before_it_rested_replays_as_it_ran(
    temporal_address: str, tmp_path: Path
) -> None:
    """A worker from before children rested at the budget (`workflow.patched` False): the
    child failed and its parent's call with it; today's code replays both histories."""
    client = await connect(temporal_address)
    serve(agents(tmp_path))
    runs = TemporalRuns(client, task_queue=f"q-{uuid.uuid4().hex[:8]}")
    before = Worker(
        client,
        task_queue=runs.task_queue,
        workflows=[AgentWorkflow],
        activities=[complete_model, run_tool],
        workflow_runner=UnsandboxedWorkflowRunner(),  # sees the patched `workflow.patched`
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(workflow, "patched", lambda _id: False)
        async with before:
            run_id = await runs.start("treed_tight", "research")
            stopped = await state_is(runs, run_id, "budget_exceeded")
            [call] = stopped.batch
            assert call.child_run_id is not None
            child = await runs.result(call.child_run_id)
            await runs.abort(run_id, "done testing")
    assert call.status == "failed"  # the old way: its child failed, and the call with it
    assert child.status == "failed"
    assert child.transitions[-1].target == "failed"  # ended, not resting
    await replays(runs, call.child_run_id)
    await replays(runs, run_id)
