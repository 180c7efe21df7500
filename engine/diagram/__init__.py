"""Diagrams of machines: Mermaid and DOT text, SVG/PNG through Graphviz, run overlays.

graph = graph_of(AgentLoop)
to_mermaid(graph)                                   # stateDiagram-v2 text
to_dot(graph, run_overlay(run, graph))              # a stored run drawn on its machine
render(to_dot(graph), "svg")                        # needs Graphviz's `dot`
"""

from loopstate.engine.diagram.dot import to_dot
from loopstate.engine.diagram.graph import Edge, Graph, Node, graph_of
from loopstate.engine.diagram.mermaid import to_mermaid
from loopstate.engine.diagram.overlay import Overlay, overlay_of, run_overlay
from loopstate.engine.diagram.render import GraphvizFailed, GraphvizNotFound, render

__all__ = [
    "Edge",
    "Graph",
    "GraphvizFailed",
    "GraphvizNotFound",
    "Node",
    "Overlay",
    "graph_of",
    "overlay_of",
    "render",
    "run_overlay",
    "to_dot",
    "to_mermaid",
]
