"""The flow machine: phases as states, gates as named guards over the data collected so far.

Declare a flow's machine as a `FlowMachine` subclass::

    class Support(FlowMachine):
        triage = State(initial=True)
        answer = State()
        done = State(final=True)
        failed = State(final=True)
        aborted = State(final=True)

        advance = triage.to(answer, cond="has_topic") | answer.to(done, cond="resolved")
        user_replied = triage.to(triage) | answer.to(answer)
        fail = failed.from_(triage, answer)
        abort = aborted.from_(triage, answer)

        def has_topic(self, data: FlowData) -> bool: ...

`advance(data=..., stop=...)` is sent when a phase's loop ends; `user_replied` when the user
answers a phase that waits for them. Guards are pure: they read only the facts the event
carries (the data and the loop's stop reason), never a clock, a store or the network.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from statemachine import StateChart
from statemachine.exceptions import InvalidDefinition

from loopstate.engine.errors import DefinitionError
from loopstate.machines.table import TransitionTable

FINAL = frozenset({"done", "failed", "aborted"})
_EVENTS = ("advance", "fail", "abort")


class FlowMachine(StateChart[Any]):
    """Base of flow machines: strict (an event the phase does not accept raises, an error in
    a guard propagates) like the agent loop."""

    allow_event_without_transition = False
    catch_errors_as_events = False
    machine_version = 1


class FlowEvents(Protocol):
    """The events the flow driver sends."""

    @property
    def current_state_value(self) -> Any: ...
    def advance(self, *, data: Any, stop: str | None) -> Any: ...
    def user_replied(self) -> Any: ...
    def fail(self) -> Any: ...
    def abort(self) -> Any: ...


def check_machine(machine: type[StateChart[Any]], phases: Mapping[str, Any]) -> str:
    """Fail at definition time unless `machine` and `phases` fit together: every non-final
    state is a phase and every phase a state; the finals are done, failed and aborted; every
    phase accepts advance, fail and abort (and user_replied if it waits for the user).
    Returns the initial phase."""
    check_shape(machine, phases)
    states = {s.id: s for s in machine.states}
    finals = {s.id for s in machine.final_states}
    if finals != FINAL:
        raise DefinitionError(f"{machine.__name__}: final states must be {sorted(FINAL)}")
    missing = sorted(set(states) - finals - set(phases))
    extra = sorted(set(phases) - set(states))
    if missing or extra:
        raise DefinitionError(
            f"{machine.__name__}: states without a phase {missing}, phases without a state {extra}"
        )
    for name, phase in phases.items():
        accepted = {e for t in states[name].transitions for e in t.events}
        needed = {*_EVENTS, *(("user_replied",) if phase.waits_for_user else ())}
        if needed - accepted:
            raise DefinitionError(
                f"{machine.__name__}: phase {name!r} does not accept {sorted(needed - accepted)}"
            )
    initial = next(s.id for s in machine.states if s.initial)
    return str(initial)


_TARGETS = {"fail": "failed", "abort": "aborted"}


def check_shape(machine: type[StateChart[Any]], phases: Mapping[str, Any]) -> None:
    """Refuse what the flow's driver cannot run, naming the state: parallel, compound or
    history states (one phase at a time), events it never sends, `fail`/`abort` going
    elsewhere than `failed`/`aborted`, `user_replied` leaving its phase or on a phase that
    never waits for the user."""
    name = machine.__name__
    for state in machine.states_map.values():
        kind = _nested(state)
        if kind is not None:
            raise DefinitionError(
                f"{name}: state {state.id!r} is {kind}: a flow's phases are flat states, one "
                "phase at a time (split it into phases joined by advance)"
            )
        for t in state.transitions:
            _check_edge(name, state.id, t, phases)


def _nested(state: Any) -> str | None:
    if state.parallel:
        return "parallel"
    if state.history:
        return "compound, with a history state"
    if state.is_compound:
        return "compound"
    return None if state.parent is None else f"nested in {state.parent.id!r}"


def _check_edge(name: str, source: str, t: Any, phases: Mapping[str, Any]) -> None:
    target = t.target.id if t.target is not None else None
    events = [str(e) for e in t.events]
    where = f"{name}: the transition from {source!r} to {target!r}"
    if not events:
        raise DefinitionError(f"{where} has no event: the flow's driver sends only events")
    for event in events:
        if event not in (*_EVENTS, "user_replied"):
            raise DefinitionError(
                f"{where} is taken on {event!r}, which the flow's driver never sends "
                "(it sends advance, user_replied, fail and abort)"
            )
        if event in _TARGETS and target != _TARGETS[event]:
            raise DefinitionError(f"{where} on {event!r} must go to {_TARGETS[event]!r}")
        if event == "user_replied":
            if target != source:
                raise DefinitionError(f"{where} on 'user_replied' must stay in {source!r}")
            phase = phases.get(source)
            if phase is not None and not phase.waits_for_user:
                raise DefinitionError(
                    f"{where} on 'user_replied': phase {source!r} never waits for the user "
                    "(give it waits_for_user=True, or drop the transition)"
                )


def flow_table(machine: type[StateChart[Any]]) -> TransitionTable:
    """`machine` read into the transition table its runs step, as the agent loop's are
    (`DefinitionError` for a machine a table cannot reproduce: actions, compound states)."""
    try:
        return TransitionTable(machine)
    except InvalidDefinition as exc:
        raise DefinitionError(f"flow machine {machine.__name__}: {exc}") from None


def gate_of(machine: type[StateChart[Any]], source: str, target: str, event: str) -> str:
    """The guards of the `event` transition from `source` to `target`, as the audit shows them."""
    for state in machine.states:
        if state.id != source:
            continue
        for t in state.transitions:
            if event in t.events and t.target is not None and t.target.id == target:
                names = [str(spec) for spec in t.cond]
                return " and ".join(names) if names else "unconditional"
    return "unconditional"
