"""What a run did on its machine: visited states, edge traversal counts, the current state.
A fork's transitions up to its fork point are its inherited part, counted apart."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from loopstate.engine.diagram.graph import Graph
    from loopstate.engine.state import RunState


class Step(Protocol):
    """Anything with `source`, `target` and `event`, e.g. `loopstate.Transition`."""

    @property
    def source(self) -> str: ...
    @property
    def target(self) -> str: ...
    @property
    def event(self) -> str: ...
    @property
    def seq(self) -> int: ...


@dataclass(frozen=True)
class Overlay:
    counts: Mapping[tuple[str, str, str], int] = field(default_factory=dict)
    """Times each (source, target, event) edge was traversed."""
    visited: frozenset[str] = frozenset()
    current: str | None = None
    inherited: Mapping[tuple[str, str, str], int] = field(default_factory=dict)
    """A fork's: times each edge was traversed before the fork point (not in `counts`)."""
    inherited_states: frozenset[str] = frozenset()
    """A fork's: states visited only before the fork point (not in `visited`)."""


def overlay_of(
    transitions: Iterable[Step], current: str | None = None, *, forked_at: int = 0
) -> Overlay:
    """The overlay of `transitions`; those up to `forked_at` (a fork's point: its copied
    past) are counted as its inherited part."""
    counts: Counter[tuple[str, str, str]] = Counter()
    inherited: Counter[tuple[str, str, str]] = Counter()
    visited: set[str] = set()
    before: set[str] = set()
    for t in transitions:
        past = t.seq <= forked_at
        (inherited if past else counts)[(t.source, t.target, t.event)] += 1
        (before if past else visited).update((t.source, t.target))
    if current is not None:
        visited.add(current)
    return Overlay(
        dict(counts), frozenset(visited), current, dict(inherited), frozenset(before - visited)
    )


def run_overlay(state: RunState, graph: Graph) -> Overlay:
    """A stored run drawn on `graph`, its machine's. A flow run's transitions hold its phases'
    agent-loop steps too (`idle → thinking → done`, the loop's `done` not the flow's): only
    the flow's own edges are drawn, and where it stands is its phase."""
    fork = state.forked_from
    forked_at = fork.seq if fork else 0
    if state.flow is None:
        return overlay_of(state.transitions, state.state, forked_at=forked_at)
    edges = {(e.source, e.target, e.event) for e in graph.edges}
    steps = [t for t in state.transitions if (t.source, t.target, t.event) in edges]
    return overlay_of(steps, state.flow.phase, forked_at=forked_at)
