"""A child workflow at its tree's budget rests with its parent, as a child run in this process
does (`Delegations.stopped`), instead of failing the parent's call.

    parent ──start child (StartRun.budget: the tree's; StartRun.above: the rest of the tree
      │       as the parent knows it, so the child counts the tree's spending)──▶ child
      │                                                 ... rests in `budget_exceeded`
      │  ◀── Signal `child`: it rests at the budget ────┘   (status failed, not ended)
    rests in `budget_exceeded` too, its call waiting for the child
      │  resume(budget=) on the parent: checked against the tree's spending (refused with
      │  nothing changed if still too low), then `budget_raised` back to `awaiting_approval`
      └── Signal `resume` (the raised budget) ──▶ the same child run goes on

The parent waits for the child's next report after the Signal (`raising`): the report it
holds still says the child rests. A history from before this (`CHILD_RESTS` unpatched) keeps
its old commands: the child failed and its parent's call failed with it.

A flow's agent phase's child workflow rests the same way (`PHASE_RESTS`): the flow rests in
`budget_exceeded` in that phase, and its resume(budget=), checked against the tree, puts the
flow back in the phase and sends the raised budget down; the phase's same run goes on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from temporalio import workflow
from temporalio.exceptions import FailureError

from loopstate.engine.budget import Overrun, Spent
from loopstate.engine.spending import spent_of
from loopstate.engine.state import RunState
from loopstate.machines.agent.delegation import ChildOutcome
from loopstate.machines.agent.loop import AgentLoop
from loopstate.temporal.data import ResumeRunRequest

if TYPE_CHECKING:
    from loopstate.temporal.ports import WorkflowStore

CHILD_RESTS = "loopstate-child-rests-at-budget"
"""The patch (`workflow.patched`) from which a child workflow at the tree's budget rests (and
its parent with it) instead of failing."""

PHASE_RESTS = "loopstate-phase-rests-at-budget"
"""The patch from which a flow's agent phase's child workflow at the flow's budget rests (the
flow with it, resumed raised: `limits.take_resume`) instead of failing. Not `CHILD_RESTS`: a
phase's run whose sub-agent rested marked that one, and still failed itself then."""


def at_budget(state: RunState) -> Overrun | None:
    """The tree's budget `state` rests at (None: it does not rest in `budget_exceeded`)."""
    if state.state != AgentLoop.budget_exceeded.id or state.failure is None:
        return None
    return state.failure.budget


def rests_at_budget(state: RunState) -> bool:
    """Whether a child run at the budget rests rather than fails: a sub-agent's from
    `CHILD_RESTS` on, a flow's agent phase's from `PHASE_RESTS` on."""
    if state.parent is None or at_budget(state) is None:
        return False
    return workflow.patched(CHILD_RESTS if state.parent.call_id is not None else PHASE_RESTS)


def over_budget(child: RunState) -> ChildOutcome | None:
    """How a child that rests at the tree's budget stands for its parent's call: waiting,
    its parent resting too (None: it does not, or the history is from before `CHILD_RESTS`)."""
    over = at_budget(child)
    if over is None or not workflow.patched(CHILD_RESTS):
        return None
    return ChildOutcome(kind="over_budget", run_id=child.run_id, output=over.message, overrun=over)


def above_of(store: WorkflowStore, child_id: str) -> tuple[RunState, ...]:
    """The rest of the tree a child about to start belongs to, as this run knows it (without
    messages): what it counts toward the tree's budget besides itself and its own children."""
    known = [*store.above.values(), *([store.state] if store.state is not None else [])]
    known += [s for s in store.children.values() if s.run_id != child_id]
    return tuple(s.evolve(messages=()) for s in known)


def known_spent(store: WorkflowStore, state: RunState) -> Spent:
    """What the tree `state` belongs to has spent, as this workflow knows it: the run itself,
    its children's last reports, and the rest of the tree its parent told it when it began."""
    total = spent_of(state)
    for other in (*store.children.values(), *store.above.values()):
        total = total + spent_of(other)
    return total


class Raising:
    """The children this run sent a raised budget to, until they tell how they stand since."""

    def __init__(self) -> None:
        self.sent: dict[str, int] = {}
        """Run id → how many transitions its last report had when the Signal went."""

    def waits(self, run_id: str) -> bool:
        return run_id in self.sent

    def told(self, state: RunState) -> None:
        """A child's report: a newer one than the resting one clears it."""
        if len(state.transitions) > self.sent.get(state.run_id, len(state.transitions)):
            del self.sent[state.run_id]

    async def resume(self, store: WorkflowStore, run_id: str, actor: str) -> None:
        """Send the raised budget to every direct child that rests at it (they go on)."""
        state = store.state
        if state is None or state.budget is None:
            return
        request = ResumeRunRequest(actor=actor, budget=state.budget)
        for child in list(store.children.values()):
            if child.parent is None or child.parent.run_id != run_id or at_budget(child) is None:
                continue
            self.sent[child.run_id] = len(child.transitions)
            try:
                await workflow.get_external_workflow_handle(child.run_id).signal("resume", request)
            except FailureError:  # it ended meanwhile (aborted): its report says so
                del self.sent[child.run_id]
