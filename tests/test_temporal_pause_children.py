"""A pause asked of a run at the top of a tree on Temporal (`TemporalRuns.pause`) while its
child workflow works reaches that child, as it does in this process: the parent passes it
down (Signal `pause`), the child rests in `paused` at its next step boundary, and each run
above rests in `paused` with it; the top run's resume goes down to the same child runs, which
go on to the same end, no tool run twice. A sub-agent's, a flow's agent phase's, and that
phase's sub-agent's (two levels). Every history replays as it ran, and one from a worker
before the patch (the child worked on, the parent paused after it) replays too.

The child's `wait_for(key)` waits for WORKDIR/release-KEY, which the test writes once the pause
has reached it (its history holds the Signal; WORKDIR/held-KEY says the call is in flight):
no sleeps. A tree resumed and paused
again while its child works on rests again the same way."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from support.waiting import until
from temporal_limits_agents import replays, served, served_before_patches, state_is
from temporalio.api.enums.v1 import EventType

from loopstate.engine.state import RunState
from loopstate.temporal import TemporalRuns


@asynccontextmanager
async def released(workdir: Path) -> AsyncIterator[None]:
    """Every wait released when the test ends, so its worker can stop even if it failed."""
    try:
        yield
    finally:
        for key in ("a", "b"):
            (workdir / f"release-{key}").touch()


async def paused_at_top(
    runs: TemporalRuns, run_id: str, workdir: Path, key: str = "a", *, reaches: bool = True
) -> None:
    """Once the child's `wait_for(key)` is in flight, pause `run_id` (the top), and release the
    call once the pause has reached the run that waits (the Signal is in its history; at once
    if it does not go down: `reaches=False`)."""
    await until(lambda: (workdir / f"held-{key}").exists())
    below = await deepest(runs, run_id)
    before = await pauses_told(runs, below)
    assert await runs.pause(run_id)
    if reaches:

        async def reached() -> bool:
            """the pause reached the working child"""
            return await pauses_told(runs, below) > before

        await until(reached, every=0.05)
    (workdir / f"release-{key}").touch()


async def deepest(runs: TemporalRuns, run_id: str) -> str:
    """The run at the bottom of the tree under `run_id` that waits for (the last child)."""
    state = await runs.state(run_id)
    below = [c.child_run_id for c in state.batch if c.child_run_id is not None]
    if state.flow is not None and state.flow.child is not None:
        below = [state.flow.child]
    return await deepest(runs, below[-1]) if below else run_id


async def pauses_told(runs: TemporalRuns, run_id: str) -> int:
    """How many Signals `pause` the run's workflow has had."""
    history = await runs.client.get_workflow_handle(run_id).fetch_history()
    signaled = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
    return sum(
        1
        for e in history.events
        if e.event_type == signaled
        and e.workflow_execution_signaled_event_attributes.signal_name == "pause"
    )


async def until_moves(runs: TemporalRuns, run_id: str, times: int) -> RunState:
    """The run once it has paused `times` times."""

    async def paused() -> RunState | None:
        """the run paused again"""
        state = await runs.state(run_id)
        moves = [t for t in state.transitions if t.event == "pause"]
        return state if len(moves) >= times and state.state == "paused" else None

    return await until(paused, every=0.05)


def last(state: RunState) -> tuple[str, str, str, str]:
    t = state.transitions[-1]
    return (t.source, t.event, t.target, t.actor or "")


async def test_a_pause_of_the_parent_reaches_its_sub_agents_child_workflow(
    temporal_address: str, tmp_path: Path
) -> None:
    async with served(temporal_address, tmp_path) as runs, released(tmp_path):
        run_id = await runs.start("pausing_treed", "look it up")
        await paused_at_top(runs, run_id, tmp_path)
        parent = await state_is(runs, run_id, "paused")
        (call,) = parent.calls
        assert call.child_run_id is not None
        child = await state_is(runs, call.child_run_id, "paused")
        assert last(child) == ("thinking", "pause", "paused", "user")  # its next boundary
        assert last(parent) == ("executing_tool", "pause", "paused", "user")
        assert call.status == "awaiting"  # waiting for the child, nothing failed
        assert (tmp_path / "lookups.txt").read_text() == "k1\n"  # no step past the boundary
        assert not await runs.pause(run_id)  # paused: stays as it is
        await runs.resume(run_id)
        # resumed, it waits for its child (awaiting_approval): a pause still goes down
        await paused_at_top(runs, run_id, tmp_path, "b")
        again = await until_moves(runs, run_id, 2)
        await state_is(runs, call.child_run_id, "paused")
        assert (tmp_path / "lookups.txt").read_text() == "k1\n"
        await runs.resume(run_id)
        result = await runs.result(run_id)
        below = await runs.result(call.child_run_id)
        await replays(runs, run_id)
        await replays(runs, call.child_run_id)
    assert [(t.source, t.target) for t in again.transitions[-2:]] == [
        ("paused", "awaiting_approval"), ("awaiting_approval", "paused"),
    ]  # fmt: skip
    assert (result.status, result.output) == ("done", "final: final: value of k3")
    assert (below.status, below.steps) == ("done", 5)
    assert (tmp_path / "lookups.txt").read_text() == "k1\nk3\n"  # each tool ran once


async def test_aborting_a_parent_paused_with_its_child_workflow_aborts_that_child(
    temporal_address: str, tmp_path: Path
) -> None:
    async with served(temporal_address, tmp_path) as runs, released(tmp_path):
        run_id = await runs.start("pausing_treed", "look it up")
        await paused_at_top(runs, run_id, tmp_path)
        (call,) = (await state_is(runs, run_id, "paused")).calls
        assert call.child_run_id is not None
        await state_is(runs, call.child_run_id, "paused")
        await runs.abort(run_id, "not needed")
        ended = await runs.result(run_id)
        below = await runs.result(call.child_run_id)
        await replays(runs, run_id)
        await replays(runs, call.child_run_id)
    assert (ended.status, below.status) == ("aborted", "aborted")  # not left paused
    assert below.stop_reason is not None
    assert "not needed" in below.stop_reason
    assert (tmp_path / "lookups.txt").read_text() == "k1\n"


async def test_a_pause_of_the_flow_reaches_its_agent_phases_child_workflow(
    temporal_address: str, tmp_path: Path
) -> None:
    async with served(temporal_address, tmp_path) as runs, released(tmp_path):
        (tmp_path / "release-b").touch()  # one pause: its second wait does not wait
        run_id = await runs.start_flow("pausing_phased", "look it up", data={"topic": "k1"})
        await paused_at_top(runs, run_id, tmp_path)
        flow = await state_is(runs, run_id, "paused")
        phase_id = f"{run_id}.draft.1"
        phase = await state_is(runs, phase_id, "paused")
        assert (flow.status, flow.phase, last(phase)[2:]) == ("paused", "draft", ("paused", "user"))
        assert (tmp_path / "lookups.txt").read_text() == "k1\n"
        await runs.resume(run_id)
        result = await runs.flow_result(run_id)
        below = await runs.result(phase_id)
        ended = await runs.state(run_id)
        await replays(runs, run_id)
        await replays(runs, phase_id)
    assert (result.status, result.data["draft"]) == ("done", "final: value of k3")
    assert below.status == "done"
    assert ended.flow is not None
    assert ended.flow.children == (phase_id,)  # no second run of the phase
    assert (tmp_path / "lookups.txt").read_text() == "k1\nk3\n"


async def test_a_pause_of_the_flow_reaches_its_phases_sub_agent_two_levels_down(
    temporal_address: str, tmp_path: Path
) -> None:
    async with served(temporal_address, tmp_path) as runs, released(tmp_path):
        run_id = await runs.start_flow("pausing_phased_treed", "look it up", data={"topic": "k1"})
        await paused_at_top(runs, run_id, tmp_path)
        await state_is(runs, run_id, "paused")
        phase_id = f"{run_id}.draft.1"
        (call,) = (await state_is(runs, phase_id, "paused")).calls
        assert call.child_run_id is not None
        await state_is(runs, call.child_run_id, "paused")
        assert (tmp_path / "lookups.txt").read_text() == "k1\n"
        await runs.resume(run_id)
        await paused_at_top(runs, run_id, tmp_path, "b")  # the flow waits for its phase again
        await until_moves(runs, phase_id, 2)
        await state_is(runs, call.child_run_id, "paused")
        await state_is(runs, run_id, "paused")
        assert (tmp_path / "lookups.txt").read_text() == "k1\n"
        await runs.resume(run_id)
        result = await runs.flow_result(run_id)
        phase_result = await runs.result(phase_id)
        below = await runs.result(call.child_run_id)
        for each in (run_id, phase_id, call.child_run_id):
            await replays(runs, each)
    assert (result.status, result.data["draft"]) == ("done", "final: final: value of k3")
    assert (phase_result.status, below.status) == ("done", "done")
    assert (tmp_path / "lookups.txt").read_text() == "k1\nk3\n"


async def test_a_parents_pause_before_the_patch_waited_for_its_child_and_replays_as_it_ran(
    temporal_address: str, tmp_path: Path
) -> None:
    """A worker from before the pause went down (`workflow.patched` False): the child worked
    on to its end, the parent took the pause at its own next boundary; today's code replays
    both histories."""
    async with served_before_patches(temporal_address, tmp_path) as runs, released(tmp_path):
        (tmp_path / "release-b").touch()
        run_id = await runs.start("pausing_treed", "look it up")
        await paused_at_top(runs, run_id, tmp_path, reaches=False)
        parent = await state_is(runs, run_id, "paused")
        (call,) = parent.calls
        assert call.child_run_id is not None
        child = await runs.result(call.child_run_id)
        assert await pauses_told(runs, call.child_run_id) == 0
        await runs.resume(run_id)
        result = await runs.result(run_id)
    assert child.status == "done"  # the old way: the pause did not reach it
    assert last(parent)[:3] == ("thinking", "pause", "paused")
    assert result.status == "done"
    await replays(runs, run_id)
    await replays(runs, call.child_run_id)
