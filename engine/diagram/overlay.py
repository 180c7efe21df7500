"""What a run did on its machine: visited states, edge traversal counts, the current state.
A fork's transitions up to its fork point are its inherited part, counted apart."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol


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
