"""A flow's agent-phase child workflow at the flow's budget rests with the flow on Temporal,
as it does in this process: the flow's resume with a raised budget (refused while too low,
nothing changed) continues the same child run; every history replays as it ran."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.waiting import until
from temporal_limits_agents import replays, served, served_before_patches, state_is

from loopstate import Budget, RunNotResumable
from loopstate.engine.state import RunState
from loopstate.temporal import TemporalRuns


async def test_a_flows_agent_phase_at_the_budget_rests_with_the_flow_and_goes_on_raised(
    temporal_address: str, tmp_path: Path
) -> None:
    async with served(temporal_address, tmp_path) as runs:
        run_id = await runs.start_flow("phased_tight", "look it up", data={"topic": "k1"})
        stopped = await state_is(runs, run_id, "budget_exceeded")  # rests, not failed
        assert stopped.flow is not None
        (child_id,) = stopped.flow.children
        child = await state_is(runs, child_id, "budget_exceeded")
        assert (stopped.status, stopped.phase) == ("failed", "draft")  # as in this process
        assert stopped.failure is not None
        assert stopped.failure.budget is not None
        assert (stopped.failure.budget.limit, stopped.failure.budget.spent.model_calls) == (
            "model_calls",
            1,  # its agent phase's first call
        )
        assert (tmp_path / "lookups.txt").read_text() == "k1\n"
        with pytest.raises(RunNotResumable, match="still over its budget: budget model_calls"):
            await runs.resume(run_id, budget=Budget(model_calls=1))
        assert (await runs.state(run_id)).transitions == stopped.transitions  # nothing changed
        assert (await runs.state(child_id)).transitions == child.transitions
        await runs.resume(run_id, budget=Budget(model_calls=3))
        result = await runs.flow_result(run_id)
        below = await runs.result(child_id)
        below_state, ended = await runs.state(child_id), await runs.state(run_id)
        await replays(runs, run_id)
        await replays(runs, child_id)
    assert (result.status, result.phase) == ("done", "done")
    assert result.data["draft"] == "final: value of k1"
    assert (below.status, below.output, below.steps) == ("done", "final: value of k1", 2)
    assert below_state.budget == Budget(model_calls=3)  # the same run went on, raised
    assert ended.flow is not None
    assert ended.flow.children == (child_id,)  # no second run of the phase
    child_path = [(t.source, t.target, t.event) for t in below.transitions]
    assert ("thinking", "budget_exceeded", "over_budget") in child_path
    assert ("budget_exceeded", "thinking", "budget_raised") in child_path
    assert (tmp_path / "lookups.txt").read_text() == "k1\n"  # nothing ran twice


async def test_a_sub_agent_of_a_flows_agent_phase_at_the_budget_rests_the_whole_tree(
    temporal_address: str, tmp_path: Path
) -> None:
    """The sub-agent rests, its phase's run with it, the flow with that: the flow's raised
    resume goes down both levels and each same run goes on."""
    async with served(temporal_address, tmp_path) as runs:
        run_id = await runs.start_flow("phased_treed", "look it up", data={"topic": "k1"})
        stopped = await state_is(runs, run_id, "budget_exceeded")
        phase_id = f"{run_id}.draft.1"
        phase = await state_is(runs, phase_id, "budget_exceeded")
        [call] = phase.batch
        assert call.child_run_id is not None
        await state_is(runs, call.child_run_id, "budget_exceeded")
        assert stopped.failure is not None
        assert stopped.failure.budget is not None
        assert stopped.failure.budget.spent.model_calls == 2  # the phase's run's and its child's
        with pytest.raises(RunNotResumable, match="still over its budget"):
            await runs.resume(run_id, budget=Budget(model_calls=2))
        await runs.resume(run_id, budget=Budget(model_calls=4))
        result = await runs.flow_result(run_id)
        phase_result = await runs.result(phase_id)
        below = await runs.result(call.child_run_id)
        for each in (run_id, phase_id, call.child_run_id):
            await replays(runs, each)
    assert (result.status, result.data["draft"]) == ("done", "final: final: value of k1")
    assert (phase_result.status, phase_result.steps, below.steps) == ("done", 2, 2)
    assert (tmp_path / "lookups.txt").read_text() == "k1\n"


async def test_aborting_a_flow_resting_at_its_phases_budget_aborts_the_phases_run(
    temporal_address: str, tmp_path: Path
) -> None:
    async with served(temporal_address, tmp_path) as runs:
        run_id = await runs.start_flow("phased_tight", "look it up", data={"topic": "k1"})
        await state_is(runs, run_id, "budget_exceeded")
        child_id = f"{run_id}.draft.1"
        await state_is(runs, child_id, "budget_exceeded")
        await runs.abort(run_id, "too costly")
        ended = await runs.flow_result(run_id)
        below = await runs.result(child_id)
        await replays(runs, run_id)
        await replays(runs, child_id)
    assert (ended.status, ended.phase) == ("aborted", "aborted")
    assert below.status == "aborted"  # not left resting with nobody above it
    assert below.stop_reason is not None
    assert "too costly" in below.stop_reason


async def test_a_phase_that_failed_at_the_budget_before_it_rested_replays_as_it_ran(
    temporal_address: str, tmp_path: Path
) -> None:
    """A worker from before the phase's run rested at the budget (`workflow.patched` False):
    that run failed; today's code replays its history and its flow's."""
    async with served_before_patches(temporal_address, tmp_path) as runs:
        run_id = await runs.start_flow("phased_tight", "look it up", data={"topic": "k1"})
        flow = await status_is(runs, run_id, "failed")  # resting, or failed with its phase
        child_id = f"{run_id}.draft.1"
        child = await runs.result(child_id)
        if flow.state == "budget_exceeded":  # it saw its phase's run rest before it failed
            await runs.abort(run_id, "done testing")
        ended = await runs.flow_result(run_id)
    assert child.status == "failed"  # the old way: ended, not resting
    assert child.transitions[-1].target == "failed"
    assert (flow.phase, ended.status in ("aborted", "failed")) == ("draft", True)
    await replays(runs, child_id)
    await replays(runs, run_id)


async def status_is(runs: TemporalRuns, run_id: str, status: str) -> RunState:
    async def reached() -> RunState | None:
        """the run reaches the status"""
        state = await runs.state(run_id)
        return state if state.status == status else None

    return await until(reached, every=0.05)
