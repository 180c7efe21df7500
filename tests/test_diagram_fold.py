"""The run page's diagram, folded for reading: the agent loop's `abort` and `fail` edges,
which leave every state, are drawn once from "any state"; an abort the run took stays
drawn from where it happened. The `diagrams/` files are not folded (the whole machine)."""

from __future__ import annotations

from loopstate.engine.diagram import Edge, Overlay, graph_of, to_mermaid
from loopstate.engine.diagram.fold import ANY, folded
from loopstate.machines.agent.loop import AgentLoop


def into(edges: tuple[Edge, ...], target: str, event: str) -> list[str]:
    return [e.source for e in edges if (e.target, e.event) == (target, event)]


def test_abort_and_fail_from_every_state_are_drawn_once() -> None:
    whole = graph_of(AgentLoop)
    assert len(into(whole.edges, "aborted", "abort")) >= 3
    graph = folded(whole)
    assert into(graph.edges, "aborted", "abort") == [ANY]
    assert into(graph.edges, "failed", "fail") == [ANY]
    assert ("thinking", "model_failed", "model_error") in {e.key for e in graph.edges}
    assert 'state "any state" as any_state' in to_mermaid(graph)


def test_an_abort_the_run_took_stays_where_it_happened() -> None:
    taken = Overlay(counts={("awaiting_approval", "aborted", "abort"): 1})
    graph = folded(graph_of(AgentLoop), taken)
    assert sorted(into(graph.edges, "aborted", "abort")) == sorted([ANY, "awaiting_approval"])
