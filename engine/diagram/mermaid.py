"""Mermaid `stateDiagram-v2` text: deterministic, every edge with its event and guards."""

from __future__ import annotations

from loopstate.engine.diagram.graph import Edge, Graph, Node
from loopstate.engine.diagram.overlay import Overlay

STYLES = (
    "    classDef visited fill:#e3f2fd,stroke:#1e88e5,color:#0d47a1",
    "    classDef current fill:#ffe082,stroke:#e65100,stroke-width:3px,color:#000",
    "    classDef unvisited fill:#fafafa,stroke:#bdbdbd,color:#9e9e9e",
)
INHERITED = "    classDef inherited fill:#eceff1,stroke:#78909c,stroke-dasharray:4 3,color:#37474f"


def to_mermaid(graph: Graph, overlay: Overlay | None = None) -> str:
    lines = ["stateDiagram-v2", "    direction LR"]
    for node in graph.walk():
        lines.append(f'    state "{_text(node.label)}" as {node.id}')
    if graph.initial is not None:
        lines.append(f"    [*] --> {graph.initial}")
    lines.extend(_block(graph, graph.nodes, "    "))
    for edge in graph.edges:
        lines.append(f"    {edge.source} --> {edge.target} : {_edge_label(edge, overlay)}")
    if overlay is not None:
        lines.extend(_classes(graph, overlay))
    return "\n".join(lines) + "\n"


def _block(graph: Graph, nodes: tuple[Node, ...], indent: str) -> list[str]:
    lines: list[str] = []
    for node in nodes:
        if node.final:
            lines.append(f"{indent}{node.id} --> [*]")
        if node.children:
            lines.append(f"{indent}state {node.id} {{")
            inner = indent + "    "
            start = graph.compound_initials.get(node.id)
            if start is not None:
                lines.append(f"{inner}[*] --> {start}")
            for i, child in enumerate(node.children):
                if node.parallel and i:
                    lines.append(f"{inner}--")
                lines.append(f"{inner}{child.id}")
            lines.extend(_block(graph, node.children, inner))
            lines.append(f"{indent}}}")
    return lines


def _edge_label(edge: Edge, overlay: Overlay | None) -> str:
    label = _text(edge.label())
    if overlay is not None:
        count = overlay.counts.get(edge.key, 0)
        if count:
            label += f" ×{count}"
        before = overlay.inherited.get(edge.key, 0)
        if before:
            label += f" (×{before} before the fork)"
    return label


def _classes(graph: Graph, overlay: Overlay) -> list[str]:
    ids = [n.id for n in graph.walk()]
    visited = [i for i in ids if i in overlay.visited and i != overlay.current]
    inherited = [i for i in ids if i in overlay.inherited_states]
    unvisited = [i for i in ids if i not in overlay.visited and i not in inherited]
    lines = [*STYLES, INHERITED] if inherited else list(STYLES)
    for name, members in (("visited", visited), ("inherited", inherited), ("unvisited", unvisited)):
        if members:
            lines.append(f"    class {','.join(members)} {name}")
    if overlay.current is not None:
        lines.append(f"    class {overlay.current} current")
    return lines


def _text(text: str) -> str:
    """Labels may not contain characters that end a Mermaid statement."""
    return text.replace('"', "'").replace(";", ",").replace("\n", " ").replace(":", " ")
