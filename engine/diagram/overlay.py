"""What a run did on its machine: visited states, edge traversal counts, the current state."""

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


@dataclass(frozen=True)
class Overlay:
    counts: Mapping[tuple[str, str, str], int] = field(default_factory=dict)
    """Times each (source, target, event) edge was traversed."""
    visited: frozenset[str] = frozenset()
    current: str | None = None


def overlay_of(transitions: Iterable[Step], current: str | None = None) -> Overlay:
    counts: Counter[tuple[str, str, str]] = Counter()
    visited: set[str] = set()
    for t in transitions:
        counts[(t.source, t.target, t.event)] += 1
        visited.update((t.source, t.target))
    if current is not None:
        visited.add(current)
    return Overlay(dict(counts), frozenset(visited), current)
