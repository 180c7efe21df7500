"""A graph for reading: an event that leads to the same state from many states (the agent
loop's `abort` and `fail`, which every state has) is drawn once, from one "any state" node,
instead of once per state across the whole picture. An edge the run took stays where it
was, so the path drawn is the run's."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

from loopstate.engine.diagram.graph import Edge, Graph, Node
from loopstate.engine.diagram.overlay import Overlay

ANY = "any_state"
"""The id of the node the folded edges leave from."""


def folded(graph: Graph, overlay: Overlay | None = None, *, least: int = 3) -> Graph:
    """`graph` with each unguarded (event, target) that leaves `least` states or more drawn
    once, from `ANY` (labelled "any state"); edges `overlay` shows taken are kept."""
    sources: dict[tuple[str, str], int] = defaultdict(int)
    for edge in graph.edges:
        if not edge.guards:
            sources[(edge.event, edge.target)] += 1
    universal = [key for key, count in sources.items() if count >= least]
    if not universal:
        return graph

    def taken(edge: Edge) -> bool:
        return overlay is not None and bool(
            overlay.counts.get(edge.key) or overlay.inherited.get(edge.key)
        )

    kept = [e for e in graph.edges if e.guards or (e.event, e.target) not in universal or taken(e)]
    once = [Edge(source=ANY, target=target, event=event) for event, target in universal]
    return replace(
        graph, nodes=(*graph.nodes, Node(id=ANY, label="any state")), edges=(*kept, *once)
    )
