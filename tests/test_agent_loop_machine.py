"""The AgentLoop statechart on its own: table, strictness, reachability."""

from __future__ import annotations

import pytest
from statemachine.exceptions import TransitionNotAllowed

from loopstate.machines import SHIPPED, AgentLoop

FINAL = {"failed", "aborted"}

# (start state, event, facts the event carries, expected target)
TABLE = [
    ("idle", "start", {}, "thinking"),
    ("thinking", "replied", {"calls": 0, "gated": 0}, "done"),
    ("thinking", "replied", {"calls": 2, "gated": 1}, "awaiting_approval"),
    ("thinking", "replied", {"calls": 2, "gated": 0}, "executing_tool"),
    ("awaiting_approval", "decided", {}, "executing_tool"),
    ("awaiting_approval", "expired", {}, "executing_tool"),
    ("executing_tool", "tools_done", {"stop": None}, "thinking"),
    ("executing_tool", "tools_done", {"stop": "max_steps"}, "done"),
    ("executing_tool", "reapprove", {}, "awaiting_approval"),
    ("thinking", "model_error", {}, "model_failed"),
    ("model_failed", "retry", {}, "thinking"),
    ("thinking", "over_budget", {}, "budget_exceeded"),
    ("executing_tool", "over_budget", {}, "budget_exceeded"),
    ("awaiting_approval", "over_budget", {}, "budget_exceeded"),
    ("budget_exceeded", "budget_raised", {"batch": True}, "executing_tool"),
    ("budget_exceeded", "budget_raised", {"batch": False, "child": True}, "awaiting_approval"),
    ("budget_exceeded", "budget_raised", {"batch": False}, "thinking"),
    ("thinking", "pause", {}, "paused"),
    ("executing_tool", "pause", {}, "paused"),
    ("awaiting_approval", "pause", {}, "paused"),
    ("paused", "unpause", {"batch": True}, "executing_tool"),
    ("paused", "unpause", {"batch": False, "child": True}, "awaiting_approval"),
    ("paused", "unpause", {"batch": False}, "thinking"),
    ("done", "user_message", {}, "thinking"),
    *[(s, "abort", {}, "aborted") for s in ("idle", "thinking", "awaiting_approval")],
    *[
        (s, "abort", {}, "aborted")
        for s in ("executing_tool", "model_failed", "budget_exceeded", "paused")
    ],
    *[(s, "fail", {}, "failed") for s in ("idle", "thinking", "awaiting_approval")],
    *[
        (s, "fail", {}, "failed")
        for s in ("executing_tool", "model_failed", "budget_exceeded", "paused")
    ],
]


@pytest.mark.parametrize(("source", "event", "facts", "target"), TABLE)
def test_each_transition_goes_where_the_table_says(
    source: str, event: str, facts: dict[str, object], target: str
) -> None:
    machine = AgentLoop(start_value=source)
    getattr(machine, event)(**facts)
    assert machine.current_state_value == target


def test_the_table_covers_every_transition_of_the_definition() -> None:
    defined = {
        (t.source.id, t.target.id, event)
        for state in AgentLoop.states
        for t in state.transitions
        for event in t.events
    }
    tabled = {(s, t, e) for s, e, _, t in TABLE}
    assert defined == tabled


@pytest.mark.parametrize(
    ("source", "event"),
    [
        ("idle", "replied"),
        ("thinking", "decided"),
        ("awaiting_approval", "tools_done"),
        ("thinking", "user_message"),
    ],
)
def test_an_event_the_state_does_not_accept_raises(source: str, event: str) -> None:
    machine = AgentLoop(start_value=source)
    with pytest.raises(TransitionNotAllowed):
        getattr(machine, event)(calls=0, gated=0, stop=None)
    assert machine.current_state_value == source


def test_an_unknown_event_raises() -> None:
    machine = AgentLoop()
    with pytest.raises(TransitionNotAllowed):
        machine.send("no_such_event")


def test_a_run_that_answered_rests_in_done_and_accepts_only_the_users_next_message() -> None:
    machine = AgentLoop(start_value="done")
    assert not machine.is_terminated
    for event in ("start", "replied", "decided", "tools_done", "reapprove", "abort", "fail"):
        with pytest.raises(TransitionNotAllowed):
            getattr(machine, event)(calls=0, gated=0, stop=None)
        assert machine.current_state_value == "done"
    machine.user_message()
    assert machine.current_state_value == "thinking"


def test_final_states_accept_no_event() -> None:
    for final in FINAL:
        machine = AgentLoop(start_value=final)
        assert machine.is_terminated
        with pytest.raises(TransitionNotAllowed):
            machine.start()


def test_an_error_in_a_guard_propagates_instead_of_becoming_an_event() -> None:
    class Broken(AgentLoop):
        def is_answer(self, calls: int) -> bool:
            raise RuntimeError("guard broke")

    machine = Broken(start_value="thinking")
    with pytest.raises(RuntimeError, match="guard broke"):
        machine.replied(calls=0, gated=0)
    assert machine.current_state_value == "thinking"


def test_a_restored_state_value_that_does_not_exist_is_refused() -> None:
    with pytest.raises(Exception, match="not a valid state value"):
        AgentLoop(start_value="dreaming")


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_every_shipped_machine_builds_and_every_state_reaches_a_final_state(name: str) -> None:
    machine_class = SHIPPED[name]
    machine_class()
    edges: dict[str, set[str]] = {}
    for state in machine_class.states:
        for t in state.transitions:
            edges.setdefault(t.source.id, set()).add(t.target.id)
    finals = {s.id for s in machine_class.final_states}
    for state in machine_class.states:
        seen, frontier = {state.id}, [state.id]
        while frontier:
            for nxt in edges.get(frontier.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    frontier.append(nxt)
        assert seen & finals, f"{name}: {state.id} cannot reach a final state"


def test_a_tool_step_takes_at_most_three_transitions() -> None:
    machine = AgentLoop(start_value="thinking")
    path = []
    for event, facts in [
        ("replied", {"calls": 1, "gated": 1}),
        ("decided", {}),
        ("tools_done", {"stop": None}),
    ]:
        getattr(machine, event)(**facts)
        path.append(machine.current_state_value)
    assert path == ["awaiting_approval", "executing_tool", "thinking"]


def test_the_loop_steps_cover_every_state_the_loop_can_be_driven_from() -> None:
    from loopstate import MemoryStore, ScriptedModel
    from loopstate.engine.core import RunCore, RunPorts
    from loopstate.engine.options import RunOptions
    from loopstate.engine.state import RunState
    from loopstate.machines.agent.loop import LOOP_STOPPED
    from loopstate.machines.agent.steps import LoopConfig, LoopSteps

    store = MemoryStore()
    core = RunCore(RunState(run_id="r"), RunPorts(store=store, clock=float, owner="o", lease_s=1))
    steps = LoopSteps(core, LoopConfig(model=ScriptedModel([]), options=RunOptions(store=store)))
    driven = {s.id for s in AgentLoop.states} - LOOP_STOPPED
    assert set(steps.steps) == driven
