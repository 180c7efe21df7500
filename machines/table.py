"""A flat, strict statechart read once into a transition table: the same decisions as the
python-statemachine instance, without its per-event engine or a machine object per run.

python-statemachine stays the definition (states, transitions, guards by name), the diagrams
and the definition-time checks. `TransitionTable(Machine)` reads that definition and refuses a
machine whose semantics a table would not reproduce: compound, parallel or history states,
eventless or multi-target transitions, callbacks other than guards (actions, enter/exit,
validators, `prepare_event`, listeners), guards that are not the name of a method. For the
machines it accepts, an event from a state takes the first of that state's transitions for the
event (in declaration order) whose guards all hold, or raises `TransitionNotAllowed`, exactly
as python-statemachine does with `allow_event_without_transition = False`; an error in a
guard propagates. A guard receives, by name, the facts its parameters ask for.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from statemachine import StateChart
from statemachine.exceptions import InvalidDefinition, InvalidStateValue, TransitionNotAllowed
from statemachine.orderedset import OrderedSet

_RESERVED = {"event", "event_data", "machine", "model", "source", "state", "target", "transition"}
"""Arguments python-statemachine gives a guard besides the event's facts: a table does not."""


@dataclass(frozen=True, slots=True)
class _Guard:
    check: Callable[..., object]
    names: frozenset[str] | None
    """The facts it takes by name; None: all of them (`**facts`)."""
    expected: bool
    """True for `cond=`, False for `unless=`."""

    def holds(self, facts: Mapping[str, Any]) -> bool:
        if self.names is None:
            return bool(self.check(**facts)) is self.expected
        given = {}  # the facts it takes (a loop: a comprehension's frame costs more than this)
        for name in self.names:
            if name in facts:
                given[name] = facts[name]
        return bool(self.check(**given)) is self.expected


@dataclass(frozen=True, slots=True)
class _Edge:
    target: str
    guards: tuple[_Guard, ...]


class TransitionTable:
    """The transitions of a flat, strict `StateChart` class, keyed by (state, event)."""

    def __init__(self, machine: type[StateChart[Any]]) -> None:
        probe = machine()  # builds it: python-statemachine's definition checks run here
        _check_strict(machine)
        self.machine = machine
        self.states = {s.value: s for s in machine.states}
        self.edges: dict[tuple[str, str], tuple[_Edge, ...]] = {}
        callbacks = _callbacks(probe)
        if callbacks:
            raise InvalidDefinition(
                f"{machine.__name__}: callbacks a table cannot run: {callbacks}"
            )
        for state in machine.states:
            _check_state(state)
            for t in state.transitions:
                _check_transition(t)
                guards = tuple(_guard(probe, spec) for spec in t.cond)
                for event in t.events:
                    key = (state.value, str(event))
                    self.edges[key] = (*self.edges.get(key, ()), _Edge(t.target.value, guards))
        self.events = frozenset(event for _, event in self.edges)
        # its events as methods of a class of its own: found as attributes are, per event
        self._positioned = type(
            f"{machine.__name__}Table",
            (TableMachine,),
            {"__slots__": (), **{event: _event_method(event) for event in self.events}},
        )

    def at(self, state: Any) -> TableMachine:
        """A machine of this table positioned at `state`."""
        if state not in self.states:
            raise InvalidStateValue(state)  # type: ignore[no-untyped-call]  # untyped upstream
        machine: TableMachine = self._positioned(self, state)
        return machine

    def move(self, source: Any, event: str, facts: Mapping[str, Any]) -> Any:
        """The state `event` takes the machine to from `source`."""
        for edge in self.edges.get((source, event), ()):
            for guard in edge.guards:
                if not guard.holds(facts):
                    break
            else:  # every guard holds
                return edge.target
        raise TransitionNotAllowed(getattr(self.machine, event), OrderedSet([self.states[source]]))


class TableMachine:
    """One run's position in a `TransitionTable`; its events are methods, as on the machine
    (`machine.replied(calls=1, gated=0)`), and raise as the machine's do."""

    __slots__ = ("current_state_value", "table")

    def __init__(self, table: TransitionTable, state: Any) -> None:
        self.table = table
        self.current_state_value = state

    def __getattr__(self, name: str) -> Any:  # not one of its events
        raise AttributeError(f"{self.table.machine.__name__} has no event {name!r}")

    @property
    def is_terminated(self) -> bool:
        return bool(self.table.states[self.current_state_value].final)


def _event_method(event: str) -> Callable[..., None]:
    def send(self: TableMachine, **facts: Any) -> None:
        self.current_state_value = self.table.move(self.current_state_value, event, facts)

    send.__name__ = send.__qualname__ = event
    send.id = event  # type: ignore[attr-defined]  # as python-statemachine's events carry it
    return send


def _check_strict(machine: type[StateChart[Any]]) -> None:
    if machine.allow_event_without_transition or machine.catch_errors_as_events:
        raise InvalidDefinition(
            f"{machine.__name__}: a table reproduces only a strict machine "
            "(allow_event_without_transition and catch_errors_as_events False)"
        )


def _check_state(state: Any) -> None:
    if not state.is_atomic or state.parent is not None:
        raise InvalidDefinition(f"state {state.id}: a table reproduces only flat machines")


def _check_transition(t: Any) -> None:
    if t.is_eventless or t.initial or len(t.targets) != 1 or t.internal:
        raise InvalidDefinition(f"{t}: a table reproduces only plain event transitions")


def _callbacks(probe: StateChart[Any]) -> list[str]:
    """The callbacks besides guards the machine's definition gives it, read from its public
    definition: every callback spec of its states (enter, exit, invoke) and transitions
    (validators, before, on, after), given explicitly or by a method named by convention
    (`on_enter_<state>`, `after_<event>`, ...), `prepare_event`, and class listeners."""
    machine = type(probe)
    found = [str(spec) for spec in _specs(machine) if _used(machine, spec)]
    if callable(getattr(machine, "prepare_event", None)):
        found.append("prepare_event")
    found += [type(listener).__name__ for listener in probe.active_listeners]
    return found


def _specs(machine: type[StateChart[Any]]) -> Iterator[Any]:
    for state in machine.states:
        yield from (*state.enter, *state.exit, *state.invoke)
        for t in state.transitions:
            yield from (*t.validators, *t.before, *t.on, *t.after)


def _used(machine: type[StateChart[Any]], spec: Any) -> bool:
    """An explicit callback, or a convention whose method the machine defines."""
    return not spec.is_convention or callable(getattr(machine, spec.attr_name, None))


def _guard(probe: StateChart[Any], spec: Any) -> _Guard:
    name = spec.func
    method = getattr(type(probe), name, None) if isinstance(name, str) else None
    if not inspect.isfunction(method) or not name.isidentifier():
        raise InvalidDefinition(f"guard {name!r}: a table takes only the name of a method")
    if inspect.iscoroutinefunction(method):
        raise InvalidDefinition(f"guard {name!r}: a table takes only synchronous guards")
    check = getattr(probe, name)
    params = inspect.signature(check).parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        names = None
    elif any(p.name in _RESERVED or p.kind not in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
             for p in params):  # fmt: skip
        raise InvalidDefinition(f"guard {name!r}: a table gives a guard only the event's facts")
    else:
        names = frozenset(p.name for p in params)
    return _Guard(check, names, spec.expected_value is not False)
