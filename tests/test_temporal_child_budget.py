"""A sub-agent's child workflow at the tree's budget rests with its parent on Temporal: the
parent's resume with a raised budget (refused while too low, nothing changed) continues the
same child run; a history from before children rested replays as it ran."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporal_limits_agents import replays, served, served_before_patches, state_is

from loopstate import Budget, RunNotResumable


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
    async with served_before_patches(temporal_address, tmp_path) as runs:
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
