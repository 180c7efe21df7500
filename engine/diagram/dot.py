"""Graphviz DOT text: deterministic node names (state ids, never `id()`), every edge labelled."""

from __future__ import annotations

import json

from loopstate.engine.diagram.graph import Edge, Graph, Node
from loopstate.engine.diagram.overlay import Overlay

VISITED = 'fillcolor="#e3f2fd", color="#1e88e5"'
CURRENT = 'fillcolor="#ffe082", color="#e65100", penwidth=3'
UNVISITED = 'fillcolor="#fafafa", color="#bdbdbd", fontcolor="#9e9e9e"'
INHERITED = 'style="rounded,filled,dashed", fillcolor="#eceff1", color="#78909c"'
INHERITED_EDGE = 'color="#78909c", style=dashed'


def to_dot(graph: Graph, overlay: Overlay | None = None) -> str:
    lines = [
        f"digraph {_q(graph.name)} {{",
        f'    graph [rankdir=LR, compound=true, fontname="Helvetica", label={_q(graph.name)}];',
        '    node [shape=box, style="rounded,filled", fillcolor="white", fontname="Helvetica",'
        " fontsize=10];",
        '    edge [fontname="Helvetica", fontsize=9];',
    ]
    if graph.initial is not None:
        lines.append('    "__initial__" [shape=point, width=0.15, label=""];')
        lines.append(f'    "__initial__" -> {_q(_anchor(graph, graph.initial))};')
    lines.extend(_nodes(graph, graph.nodes, overlay, "    "))
    lines.extend(f"    {_edge(graph, e, overlay)}" for e in graph.edges)
    lines.append("}")
    return "\n".join(lines) + "\n"


def _nodes(
    graph: Graph, nodes: tuple[Node, ...], overlay: Overlay | None, indent: str
) -> list[str]:
    lines: list[str] = []
    for node in nodes:
        if node.children:
            lines.append(f"{indent}subgraph {_q('cluster_' + node.id)} {{")
            lines.append(f'{indent}    label={_q(node.label)}; style="rounded";')
            lines.extend(_nodes(graph, node.children, overlay, indent + "    "))
            lines.append(f"{indent}}}")
            continue
        attrs = [f"label={_q(node.label)}"]
        if node.final:
            attrs.append("peripheries=2")
        style = _node_style(node.id, overlay)
        if style:
            attrs.append(style)
        lines.append(f"{indent}{_q(node.id)} [{', '.join(attrs)}];")
    return lines


def _node_style(node_id: str, overlay: Overlay | None) -> str:
    if overlay is None:
        return ""
    if node_id == overlay.current:
        return CURRENT
    if node_id in overlay.inherited_states:
        return INHERITED
    return VISITED if node_id in overlay.visited else UNVISITED


def _edge(graph: Graph, edge: Edge, overlay: Overlay | None) -> str:
    attrs = [f"label={_q(edge.label())}"]
    source, target = _anchor(graph, edge.source), _anchor(graph, edge.target)
    if source != edge.source:
        attrs.append(f"ltail={_q('cluster_' + edge.source)}")
    if target != edge.target:
        attrs.append(f"lhead={_q('cluster_' + edge.target)}")
    if overlay is not None:
        attrs[0:1] = _traversed(edge, overlay)
    return f"{_q(source)} -> {_q(target)} [{', '.join(attrs)}];"


def _traversed(edge: Edge, overlay: Overlay) -> list[str]:
    """An edge's label and style: traversed by the run (a fork: after its fork point), only
    before the fork point (dashed), or never."""
    count, before = overlay.counts.get(edge.key, 0), overlay.inherited.get(edge.key, 0)
    label = edge.label() + (f" ×{count}" if count else "")
    label += f" (×{before} before the fork)" if before else ""
    if count:
        return [f"label={_q(label)}", 'color="#1e88e5", penwidth=2']
    if before:
        return [f"label={_q(label)}", INHERITED_EDGE]
    return [f"label={_q(label)}", 'color="#bdbdbd", fontcolor="#9e9e9e"']


def _anchor(graph: Graph, state_id: str) -> str:
    """Edges to or from a compound state attach to its initial (or first) leaf."""
    by_id = {n.id: n for n in graph.walk()}
    node = by_id.get(state_id)
    while node is not None and node.children:
        first = graph.compound_initials.get(node.id, node.children[0].id)
        node = by_id[first]
    return node.id if node is not None else state_id


def _q(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)
