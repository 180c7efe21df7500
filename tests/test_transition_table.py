"""The transition table the driver steps decides as the python-statemachine machine does."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest
from statemachine import State, StateChart
from statemachine.exceptions import InvalidDefinition, InvalidStateValue, TransitionNotAllowed

from loopstate import DefinitionError, Flow, FlowMachine, MemoryStore, Phase, ScriptedModel
from loopstate.machines.agent.loop import LOOP_TABLE, AgentLoop, agent_loop
from loopstate.machines.table import TableMachine, TransitionTable

FACTS = [
    {},
    *({"calls": c, "gated": g} for c, g in [(0, 0), (2, 0), (2, 1), (1, 1)]),
    {"stop": None},
    {"stop": "max_steps"},
    {"calls": 0, "gated": 0, "stop": None},
]


def outcome(machine: Any, event: str, facts: dict[str, Any]) -> str:
    try:
        getattr(machine, event)(**facts)
    except TransitionNotAllowed as exc:
        return f"refused: {exc}"
    except TypeError:
        return "type error"  # a guard missing the fact it needs, in both
    return str(machine.current_state_value)


@pytest.mark.parametrize("state", [s.value for s in AgentLoop.states])
def test_every_event_with_any_facts_from_every_state_ends_where_the_machine_ends(
    state: str,
) -> None:
    for event, facts in itertools.product(sorted(e.id for e in AgentLoop.events), FACTS):
        expected = outcome(AgentLoop(start_value=state), event, facts)
        assert outcome(agent_loop(state), event, facts) == expected, (state, event, facts)


def test_the_table_holds_every_event_of_the_machine() -> None:
    assert set(LOOP_TABLE.events) == {e.id for e in AgentLoop.events}


def test_an_unknown_state_or_event_is_refused_as_the_machine_refuses_it() -> None:
    with pytest.raises(InvalidStateValue):
        agent_loop("dreaming")
    with pytest.raises(AttributeError, match="no event 'dream'"):
        agent_loop("thinking").dream  # noqa: B018


def test_an_error_in_a_guard_propagates_and_leaves_the_state() -> None:
    class Broken(AgentLoop):
        def is_answer(self, calls: int) -> bool:
            raise RuntimeError("guard broke")

    machine = TransitionTable(Broken).at("thinking")
    with pytest.raises(RuntimeError, match="guard broke"):
        machine.replied(calls=0, gated=0)
    assert machine.current_state_value == "thinking"


def test_unless_guards_and_guards_taking_every_fact_decide_as_in_the_machine() -> None:
    class Gate(StateChart):  # type: ignore[type-arg]
        allow_event_without_transition = False
        catch_errors_as_events = False
        a = State(initial=True)
        b = State()
        c = State(final=True)
        go = a.to(c, unless="closed") | a.to(b, cond="wide") | b.to(c)

        def closed(self, door: str) -> bool:
            return door == "shut"

        def wide(self, **facts: Any) -> bool:
            return facts.get("width", 0) > 1

    for facts in [{"door": "shut", "width": 2}, {"door": "open"}, {"door": "shut"}]:
        assert outcome(TransitionTable(Gate).at("a"), "go", facts) == outcome(Gate(), "go", facts)


def _machine(**body: Any) -> type[StateChart[Any]]:
    base: dict[str, Any] = {
        "allow_event_without_transition": False,
        "catch_errors_as_events": False,
    }
    return type("M", (StateChart,), {**base, **body})


def _noop(*args: Any, **kwargs: Any) -> None:
    return None


class _Listener:
    def after_transition(self) -> None: ...


ACTIONS = {
    "on_enter by convention": lambda a, b: {"go": a.to(b), "on_enter_b": _noop},
    "after_<event> by convention": lambda a, b: {"go": a.to(b), "after_go": _noop},
    "before_transition by convention": lambda a, b: {"go": a.to(b), "before_transition": _noop},
    "an explicit on=": lambda a, b: {"go": a.to(b, on="act"), "act": _noop},
    "an explicit validator": lambda a, b: {"go": a.to(b, validators="act"), "act": _noop},
    "prepare_event": lambda a, b: {"go": a.to(b), "prepare_event": lambda *_, **__: {}},
    "a class listener": lambda a, b: {"go": a.to(b), "listeners": [_Listener]},
}


@pytest.mark.parametrize("body", ACTIONS.values(), ids=ACTIONS.keys())
def test_a_machine_with_actions_is_refused(body: Callable[[State, State], dict[str, Any]]) -> None:
    """Read from the machine's public definition: its states' and transitions' callbacks."""
    a, b = State(initial=True), State(final=True)
    machine = _machine(a=a, b=b, **body(a, b))
    with pytest.raises(InvalidDefinition, match="callbacks a table cannot run"):
        TransitionTable(machine)


def test_a_flow_is_stepped_through_its_table_and_one_with_actions_is_refused() -> None:
    """Flows and agents share one dispatcher: a flow machine a table cannot reproduce is a
    definition error when the `Flow` is built, not a surprise in a run."""

    class Ask(FlowMachine):
        ask = State(initial=True)
        done, failed, aborted = State(final=True), State(final=True), State(final=True)
        advance = ask.to(done, cond="answered")
        fail = ask.to(failed)
        abort = ask.to(aborted)

        def answered(self, data: dict[str, Any]) -> bool:
            return "answer" in data

    phases = {"ask": Phase(instructions="Ask.", model=ScriptedModel(["ok"]))}
    flow = Flow(Ask, phases, store=MemoryStore())
    machine = flow._config.table.at("ask")
    assert isinstance(machine, TableMachine)
    machine.advance(data={"answer": 1}, stop=None)
    assert machine.current_state_value == "done"

    class Acting(Ask):
        def on_enter_done(self) -> None: ...

    with pytest.raises(DefinitionError, match=r"flow machine Acting: .*callbacks a table"):
        Flow(Acting, phases, store=MemoryStore())


def test_a_lenient_machine_is_refused() -> None:
    a, b = State(initial=True), State(final=True)
    machine = _machine(a=a, b=b, go=a.to(b), allow_event_without_transition=True)
    with pytest.raises(InvalidDefinition, match="only a strict machine"):
        TransitionTable(machine)


def test_a_guard_that_is_not_a_method_name_is_refused() -> None:
    a, b = State(initial=True), State(final=True)
    machine = _machine(a=a, b=b, go=a.to(b, cond=lambda: True))
    with pytest.raises(InvalidDefinition, match="only the name of a method"):
        TransitionTable(machine)


def test_a_guard_asking_for_the_engines_arguments_is_refused() -> None:
    a, b = State(initial=True), State(final=True)
    machine = _machine(a=a, b=b, go=a.to(b, cond="ok"), ok=lambda self, source: True)
    with pytest.raises(InvalidDefinition, match="only the event's facts"):
        TransitionTable(machine)


def test_an_async_guard_is_refused() -> None:
    async def ok(self: object) -> bool:
        return True

    a, b = State(initial=True), State(final=True)
    machine = _machine(a=a, b=b, go=a.to(b, cond="ok"), ok=ok)
    with pytest.raises(InvalidDefinition, match="only synchronous guards"):
        TransitionTable(machine)
