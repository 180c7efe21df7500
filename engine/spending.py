"""What a run, and the tree of runs it belongs to, has spent against its `Budget`."""

from __future__ import annotations

from loopstate.engine.budget import Spent
from loopstate.engine.errors import RunNotFound
from loopstate.engine.state import RunState
from loopstate.engine.store import Store
from loopstate.engine.tree import child_runs, run_tree

_RAN = frozenset({"running", "succeeded", "failed", "interrupted"})
"""A call that started counts toward `tool_calls` (a denied or invalid one never ran)."""


def spent_of(state: RunState) -> Spent:
    """What `state` alone has spent."""
    usage = state.usage
    return Spent(
        tokens=usage.total_tokens,
        cost_usd=usage.cost_usd or 0.0,
        unpriced=usage.unpriced,
        tool_calls=sum(c.status in _RAN for c in state.calls),
        model_calls=state.steps,
        wall_s=state.driven_s,
    )


def in_tree(state: RunState) -> bool:
    """Whether `state` belongs to a tree of runs (it delegated, or was delegated to)."""
    return state.parent is not None or bool(child_runs(state))


async def tree_spent(store: Store, state: RunState) -> Spent:
    """What the tree `state` belongs to has spent, from its top run down: the stored runs,
    with `state` as the caller holds it (it may have spent more than it has saved)."""
    if not in_tree(state):
        return spent_of(state)
    top = state
    try:
        while top.parent is not None:
            top = await store.load(top.parent.run_id)
        tree = await run_tree(store, top.run_id)
    except RunNotFound:  # the run is being created: only its own spending is known
        return spent_of(state)
    total = Spent()
    for node in tree.walk():
        held = node.state.run_id == state.run_id
        total = total + spent_of(state if held else node.state)
    if not any(node.state.run_id == state.run_id for node in tree.walk()):
        total = total + spent_of(state)  # a child not stored yet
    return total
