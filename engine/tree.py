"""A run and the child runs it delegated to (sub-agents used as tools), read from a store:
the whole tree, what waits for a decision anywhere in it, and its usage rolled up.

A parent's call that delegated keeps its child's id (`CallRecord.child_run_id`), a flow keeps
its agent phases' (`FlowPosition.children`), and the child keeps its parent
(`RunState.parent`), so the tree is found from the store alone: no
agent, no model, no tool is needed to list or decide what it waits for.
"""

from __future__ import annotations

from collections.abc import Iterator

from loopstate.engine.approval import ApprovalRequest
from loopstate.engine.data import Frozen
from loopstate.engine.errors import DecisionError, RunNotFound
from loopstate.engine.model import Usage
from loopstate.engine.state import ENDED, CallRecord, RunState
from loopstate.engine.store import Store

MAIN = "main"
"""The key of the top-level run in `UsageReport.by_agent`."""


class RunTree(Frozen):
    """A run with its child runs, each under the call that started it."""

    state: RunState
    children: tuple[tuple[str, RunTree], ...] = ()
    """(the parent's call id, the child's tree), in the order of the calls; an agent phase's
    child is keyed by its own run id."""

    def walk(self) -> Iterator[RunTree]:
        """The tree and every descendant, depth first."""
        yield self
        for _, child in self.children:
            yield from child.walk()


class UsageReport(Frozen):
    """A run's usage: its own model calls, the total with every descendant's, and per agent
    (the top-level run as `"main"`, a sub-agent by the name its parent calls it; a sub-agent
    called several times is summed)."""

    own: Usage
    total: Usage
    by_agent: dict[str, Usage]


def delegated(call: CallRecord) -> bool:
    """Whether the call waits for a child run (a suspended sub-agent), not for a person."""
    return call.child_run_id is not None and call.status == "awaiting"


def waits_on_child(state: RunState) -> bool:
    """Whether the run waits for a child run: a sub-agent's call, or an agent phase's run."""
    if state.flow is not None and state.flow.child is not None:
        return state.state in ("awaiting_approval", "paused")  # (paused: the run it waits for)
    return any(map(delegated, state.batch))


def waited_children(state: RunState) -> list[str]:
    """The child runs `state` waits for (see `waits_on_child`)."""
    if not waits_on_child(state):
        return []
    if state.flow is not None and state.flow.child is not None:
        return [state.flow.child]
    return [c.child_run_id for c in state.batch if delegated(c) and c.child_run_id is not None]


def child_runs(state: RunState) -> list[tuple[str, str]]:
    """(key, run id) of every child run `state` started: a delegating call's (keyed by the
    call id) and an agent phase's (keyed by its run id), in order."""
    found = [(c.call_id, c.child_run_id) for c in state.calls if c.child_run_id is not None]
    if state.flow is not None:
        found += [(run_id, run_id) for run_id in state.flow.children]
    return found


async def run_tree(store: Store, run_id: str) -> RunTree:
    """The stored run `run_id` with all its descendants (`RunNotFound` if it is not stored;
    a child not stored yet is left out)."""
    state = await store.load(run_id)
    children: list[tuple[str, RunTree]] = []
    for key, child_id in child_runs(state):
        try:
            children.append((key, await run_tree(store, child_id)))
        except RunNotFound:
            continue  # the parent stopped between naming the child and starting it
    return RunTree(state=state, children=tuple(children))


def tree_pending(tree: RunTree) -> list[ApprovalRequest]:
    """The calls waiting for a person anywhere in `tree`, each with the `run_id` it belongs
    to; a call that waits for its sub-agent is not listed, the sub-agent's calls are."""
    state = tree.state
    if state.state in ENDED:  # nothing below an ended run waits for anyone
        return []
    found = [
        c.request().model_copy(update={"run_id": state.run_id})
        for c in state.batch
        if c.status == "awaiting" and not delegated(c)
    ]
    for _, child in tree.children:
        found += tree_pending(child)
    return found


async def pending_tree(store: Store, run_id: str) -> list[ApprovalRequest]:
    """What waits for a decision in the run `run_id` and every run it delegated to."""
    return tree_pending(await run_tree(store, run_id))


def owner_of(tree: RunTree, call_id: str) -> str | None:
    """The run in `tree` whose pending call `call_id` is (the top run first; `None` if none
    has it); `DecisionError` if two child runs wait on calls with that id."""
    top = tree.state
    if any(c.call_id == call_id and not delegated(c) for c in top.batch):
        return top.run_id
    owners = [p.run_id for p in tree_pending(tree) if p.call_id == call_id]
    if len(set(owners)) > 1:
        raise DecisionError(
            f"call {call_id} waits in several runs ({', '.join(o or '' for o in owners)}): "
            "decide it on the run it belongs to"
        )
    return owners[0] if owners else None


def usage_report(tree: RunTree) -> UsageReport:
    """`tree`'s usage: own, total and per agent."""
    by_agent: dict[str, Usage] = {}
    total = Usage()
    for node in tree.walk():
        state = node.state
        name = MAIN if node is tree or state.parent is None else state.parent.name or MAIN
        by_agent[name] = by_agent.get(name, Usage()) + state.usage
        total = total + state.usage
    return UsageReport(own=tree.state.usage, total=total, by_agent=by_agent)


async def usage_tree(store: Store, run_id: str) -> UsageReport:
    """The usage of the run `run_id` and every run it delegated to, rolled up."""
    return usage_report(await run_tree(store, run_id))
