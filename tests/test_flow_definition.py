"""Flow definitions fail when built wrong; stop conditions and templates do what they say."""

from __future__ import annotations

from typing import Any

import pytest
from statemachine import HistoryState, State

from loopstate import DefinitionError, MemoryStore, RunState, ScriptedModel
from loopstate.engine.models.scripted import call
from loopstate.engine.state import FlowPosition
from loopstate.machines.coaching import PHASES, CoachingFlow
from loopstate.machines.flows import Flow, FlowMachine, Phase, has_tool_call, step_count_is
from loopstate.machines.flows.phase import BoundPhase

MODEL = ScriptedModel([])


def test_the_coaching_machine_shows_every_gate_by_name() -> None:
    gates = {
        (t.source.id, t.target.id): [str(c) for c in t.cond]
        for s in CoachingFlow.states
        for t in s.transitions
        if "advance" in t.events
    }
    assert gates[("intake", "safety")] == ["intake_complete"]
    assert gates[("safety", "intake")] == ["safety_blocked"]
    assert gates[("present", "goal_capture")] == ["goal_changed"]


@pytest.mark.parametrize(
    ("phases", "models", "message"),
    [
        ({k: v for k, v in PHASES.items() if k != "plan"}, {"default": MODEL}, "without a phase"),
        ({**PHASES, "extra": Phase()}, {"default": MODEL}, "phases without a state"),
        (PHASES, {"default": MODEL, "nope": MODEL}, "phases that do not exist"),
        (PHASES, {}, "has no model"),
        (
            {**PHASES, "safety": Phase(model=MODEL, waits_for_user=True)},
            {"default": MODEL},
            "user_replied",
        ),
    ],
)
def test_a_flow_that_does_not_fit_its_machine_fails_when_built(
    phases: dict[str, Phase], models: dict[str, Any], message: str
) -> None:
    with pytest.raises(DefinitionError, match=message):
        Flow(CoachingFlow, phases, models=models, store=MemoryStore())


def test_models_route_by_phase_then_phase_model_then_default() -> None:
    fast, slow, own = (
        ScriptedModel([], name="f"),
        ScriptedModel([], name="s"),
        ScriptedModel([], name="o"),
    )
    phases = {**PHASES, "intake": Phase(model=own, waits_for_user=True)}
    flow = Flow(
        CoachingFlow, phases, models={"analyst": slow, "default": fast}, store=MemoryStore()
    )
    routed = {name: p.model.name if p.model else None for name, p in flow.phases.items()}
    assert routed == {
        "goal_capture": "f",
        "analyst": "s",
        "intake": "o",
        "safety": None,
        "plan": "f",
        "present": "f",
    }


def test_stop_conditions_look_at_the_latest_batch_and_the_phases_steps() -> None:
    state = RunState(run_id="r", steps=7, flow=FlowPosition(phase="p", phase_step=5))
    assert step_count_is(2)(state) == "step_count_is(2)"
    assert step_count_is(3)(state) is None
    assert has_tool_call("set_goal")(state) is None


def test_a_template_renders_the_data_and_names_what_is_not_known_yet() -> None:
    phase = BoundPhase.build("p", Phase(instructions="Goal: {goal}; age {age}"), MODEL)
    assert phase.instructions({"goal": "5k"}) == "Goal: 5k; age (unknown: age)"


def test_an_output_phase_forces_its_tool_and_stops_when_it_ran() -> None:
    phase = BoundPhase.build("analyst", PHASES["analyst"], MODEL)
    assert phase.tool_choice == "required"
    assert "submit_intake_schema" in phase.tools
    assert call("submit_intake_schema").name == "submit_intake_schema"


class Parallel(FlowMachine):
    class work(State.Parallel):  # python-statemachine names states by attribute
        class draft(State.Compound):
            writing = State(initial=True)

        class review(State.Compound):
            reading = State(initial=True)

    done, failed, aborted = State(final=True), State(final=True), State(final=True)
    advance = work.to(done)
    fail = work.to(failed)
    abort = work.to(aborted)


class Nested(FlowMachine):
    class work(State.Compound):
        first = State(initial=True)
        second = State()
        back = HistoryState()
        onward = first.to(second)

    done, failed, aborted = State(final=True), State(final=True), State(final=True)
    advance = work.to(done)
    fail = work.to(failed)
    abort = work.to(aborted)


class Skipping(FlowMachine):
    a = State(initial=True)
    b = State()
    done, failed, aborted = State(final=True), State(final=True), State(final=True)
    advance = a.to(b) | b.to(done)
    skip = a.to(done)
    fail = failed.from_(a, b)
    abort = aborted.from_(a, b)


class Misrouted(FlowMachine):
    a = State(initial=True)
    done, failed, aborted = State(final=True), State(final=True), State(final=True)
    advance = a.to(done)
    user_replied = a.to(done)
    fail = failed.from_(a)
    abort = aborted.from_(a)


@pytest.mark.parametrize(
    ("machine", "phases", "message"),
    [
        (Parallel, {"work": Phase()}, "Parallel: state 'work' is parallel: a flow's phases are"),
        (Nested, {"work": Phase()}, "Nested: state 'work' is compound, with a history state"),
        (
            Skipping,
            {"a": Phase(), "b": Phase()},
            "Skipping: the transition from 'a' to 'done' is taken on 'skip', which the flow's "
            "driver never sends",
        ),
        (
            Misrouted,
            {"a": Phase(waits_for_user=True)},
            "Misrouted: the transition from 'a' to 'done' on 'user_replied' must stay in 'a'",
        ),
    ],
)
def test_a_machine_the_flow_driver_cannot_run_is_refused_naming_the_state(
    machine: type[FlowMachine], phases: dict[str, Phase], message: str
) -> None:
    with pytest.raises(DefinitionError) as refused:
        Flow(machine, phases, model=MODEL, store=MemoryStore())
    assert str(refused.value).startswith(message)


def test_user_replied_on_a_phase_that_never_waits_is_refused() -> None:
    phases = {**PHASES, "intake": Phase(model=MODEL)}  # intake accepts user_replied
    with pytest.raises(DefinitionError, match="phase 'intake' never waits for the user"):
        Flow(CoachingFlow, phases, models={"default": MODEL}, store=MemoryStore())


def test_a_form_may_ask_exactly_the_fields_of_the_profile() -> None:
    import typing

    from loopstate.machines.coaching.shapes import IntakeData, IntakeFieldName

    assert list(typing.get_args(IntakeFieldName)) == list(IntakeData.model_fields)
