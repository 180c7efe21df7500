"""A machine class as a neutral, deterministic graph: states (nested) and edges.

Structure comes from python-statemachine's own `extract()` (compound, parallel and history
states included); edges carry the event *ids* code calls (`tools_done`, not "Tools done") and
their guards, in definition order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from statemachine.contrib.diagram.extract import extract
from statemachine.contrib.diagram.model import DiagramState, StateType


@dataclass(frozen=True)
class Node:
    id: str
    label: str
    initial: bool = False
    final: bool = False
    parallel: bool = False
    children: tuple[Node, ...] = ()


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    event: str
    guards: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.source, self.target, self.event)

    def label(self) -> str:
        guard = f" [{' and '.join(self.guards)}]" if self.guards else ""
        return f"{self.event}{guard}"


@dataclass(frozen=True)
class Graph:
    name: str
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    initial: str | None = None
    compound_initials: dict[str, str] = field(default_factory=dict)

    def walk(self) -> list[Node]:
        """Every node, parents before children, in definition order."""
        out: list[Node] = []
        stack = list(reversed(self.nodes))
        while stack:
            node = stack.pop()
            out.append(node)
            stack.extend(reversed(node.children))
        return out


def graph_of(machine: Any) -> Graph:
    """The graph of a python-statemachine machine class (or instance)."""
    diagram = extract(machine)
    event_ids = {_display(e): e.id for e in getattr(machine, "_events", {})}
    nodes = tuple(_node(s) for s in diagram.states)
    edges = tuple(
        Edge(t.source, target, event_ids.get(t.event, t.event), tuple(t.guards))
        for t in diagram.transitions
        if not t.is_initial
        for target in (t.targets or [t.source])
    )
    initials: dict[str, str] = {}
    for node in Graph("", nodes, ()).walk():
        for child in node.children:
            if child.initial:
                initials[node.id] = child.id
    top = next((n.id for n in nodes if n.initial), nodes[0].id if nodes else None)
    return Graph(getattr(machine, "name", type(machine).__name__), nodes, edges, top, initials)


def _display(event: Any) -> str:
    return str(getattr(event, "name", event))


def _node(state: DiagramState) -> Node:
    return Node(
        id=state.id,
        label=state.name,
        initial=state.is_initial,
        final=state.type == StateType.FINAL,
        parallel=state.type == StateType.PARALLEL,
        children=tuple(_node(c) for c in state.children),
    )
