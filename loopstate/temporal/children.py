"""Child runs on Temporal: a sub-agent's call (`Agent.as_tool`) or a flow's agent phase runs
as a child workflow, started by the parent's workflow with the child run's own id.

    parent call ──start child workflow──▶ child run (its own workflow, history, audit trail)
         ▲                                    │ every change: Signal `child` to the parent
         └── result / waits / fails / aborted ◀┘   (its state without messages, and its own
                                                    children's)

The parent keeps what its children last told it in its `WorkflowStore`, so the engine's own
tree functions answer for it: the pending calls of the whole tree, where a decision goes
(`owner_of`), usage rolled up, a child's outcome (`child_outcome`). A decision given to the
parent for a child's call is checked there (`check_decision` against the child's state) and
sent to the run it waits in (Signal `decide`). A run that ends aborted or failed aborts the
children it still waits for; a child aborted by a person aborts its parent (as in-process). A
pause asked of a run that waits for a working child goes down to it (`child_pause`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from temporalio import workflow
from temporalio.exceptions import FailureError
from temporalio.workflow import ChildWorkflowHandle, ParentClosePolicy

from loopstate.engine.approval import ApprovalRequest
from loopstate.engine.decision_check import check_decision
from loopstate.engine.errors import UnknownCall
from loopstate.engine.result import RunResult
from loopstate.engine.state import ENDED, CallRecord, ParentLink, RunState
from loopstate.engine.tree import (
    RunTree,
    UsageReport,
    child_runs,
    delegated,
    owner_of,
    tree_pending,
    usage_report,
)
from loopstate.machines.agent.agent import Agent
from loopstate.machines.agent.delegation import ChildOutcome, ChildScope, child_outcome
from loopstate.temporal.child_budget import Raising, above_of, at_budget, over_budget
from loopstate.temporal.child_pause import PauseDown
from loopstate.temporal.data import (
    WORKFLOW,
    AbortRequest,
    ChildState,
    DecideRequest,
    RunSettings,
    StartRun,
)
from loopstate.temporal.ports import WorkflowStore

_SETTLED = frozenset({"awaiting_approval", *ENDED})
"""How a child stands once its parent may go on: waiting for a decision, or ended."""


class ChildWorkflows:
    """One run's child workflows: started, followed, decided through, aborted. A
    `ChildRunner` for the run's loop (sub-agents) and its flow's agent phases."""

    def __init__(
        self, address: str, store: WorkflowStore, settings: RunSettings, parent: ParentLink | None
    ) -> None:
        self.address = address
        self.store = store
        self.settings = settings
        self.parent = parent
        self.changed = False
        """A child told something since the run last looked."""
        self.started: set[str] = set()
        self.forwarded: dict[str, str] = {}
        """Calls of child runs decided through this run, by call id, until they no longer wait."""
        self._told: object = None
        self._signals: set[asyncio.Task[None]] = set()
        self.handles: dict[str, ChildWorkflowHandle[Any, RunResult]] = {}
        """The child workflows this workflow run started (a closed one that never said it
        ended is a lost child: its call fails)."""
        self.raising = Raising()
        """Children sent a raised budget (or a resume), until they say how they stand since."""
        self.pausing = PauseDown(store, self.raising)
        """The pause asked of this run, passed down to the children it waits for."""
        self.aborting: Callable[[], AbortRequest | None] = lambda: None
        """Whether this run is asked to abort (a child it waits for is aborted then)."""

    # -- the ChildRunner ---------------------------------------------------------------------

    async def __call__(
        self, agent: Agent, prompt: str, *, run_id: str, parent: ParentLink, scope: ChildScope
    ) -> ChildOutcome:
        """Start the child workflow `run_id` (once), wait until it ends or waits for a
        decision, and say how it stands."""
        children = self.store.children
        if run_id not in children and run_id not in self.started:
            self.started.add(run_id)
            start = StartRun(
                agent=self._address(parent),
                prompt=prompt,
                settings=self.settings,
                parent=parent,
                budget=scope.budget,
                above=above_of(self.store, run_id),
            )
            handle = await workflow.start_child_workflow(
                WORKFLOW,
                start,
                id=run_id,
                task_queue=workflow.info().task_queue,
                parent_close_policy=ParentClosePolicy.ABANDON,  # it is aborted explicitly
                result_type=RunResult,
            )
            self.handles[run_id] = handle
            handle.add_done_callback(self._closed)

        def settled() -> bool:
            child = children.get(run_id)
            told = child is not None and (child.status in _SETTLED or self.pausing.rests(child))
            return (told and not self.raising.waits(run_id)) or self.lost(run_id) is not None

        def looks() -> bool:
            return self.pausing.wakes(run_id)

        while True:  # a pause asked of this run meanwhile goes down to the child (`child_pause`)
            await workflow.wait_condition(
                lambda: settled() or self.aborting() is not None or looks()
            )
            if settled() or self.aborting() is not None:
                break
            self.pausing.enabled()
            await self.pausing.pass_down(run_id)
        abort = self.aborting()
        if not settled() and abort is not None:  # this run is aborted: so is the child
            await _signal(run_id, "abort", _below(abort, self.store))
            await workflow.wait_condition(settled)
        lost = self.lost(run_id)
        if lost is not None:
            return ChildOutcome(kind="failed", run_id=run_id, output=f"failed: {lost}")
        return over_budget(children[run_id]) or await child_outcome(
            self.store, RunResult.of(children[run_id])
        )

    def _address(self, parent: ParentLink) -> str:
        """The child's address: below this run's, through the phase a flow's call is in."""
        state = self.store.state
        if parent.call_id is not None and state is not None and state.flow is not None:
            return f"{self.address}/{state.flow.phase}/{parent.name}"
        return f"{self.address}/{parent.name}"

    def lost(self, run_id: str) -> str | None:
        """Why the child's workflow closed without its run ending (an operator terminated
        it, its workflow failed); None while it goes on or once it has ended and said so."""
        handle = self.handles.get(run_id)
        child = self.store.children.get(run_id)
        if handle is None or not handle.done() or (child is not None and child.status in ENDED):
            return None
        if handle.cancelled():
            return "its workflow was cancelled"
        error = handle.exception()
        cause = getattr(error, "cause", None) or error
        return f"its workflow closed without ending the run: {cause or 'no reason given'}"

    def _closed(self, _: object) -> None:
        self.changed = True  # a waiting run looks again: the child it waits for closed

    # -- what children tell ------------------------------------------------------------------

    def took(self, report: ChildState) -> None:
        """Keep what a child said of itself and its children; forget forwarded decisions for
        calls that no longer wait."""
        for state in report.states:
            self.store.children[state.run_id] = state
            self.raising.told(state)
        waiting = {p.call_id for p in self._tree_pending()}
        self.forwarded = {c: r for c, r in self.forwarded.items() if c in waiting}
        self.changed = True

    async def tell_parent(self, state: RunState) -> None:
        """Tell the parent's workflow how this run (and its children) stand, if that changed."""
        if self.parent is None:
            return
        states = (state, *self.store.children.values())
        told = tuple((s.run_id, s.status, len(s.transitions), len(s.pending)) for s in states)
        if told == self._told:
            return
        self._told = told
        report = ChildState(states=tuple(s.evolve(messages=()) for s in states))
        try:
            await workflow.get_external_workflow_handle(self.parent.run_id).signal("child", report)
        except FailureError:  # the parent has ended: nobody waits for this run any more
            return

    # -- decisions through the parent --------------------------------------------------------

    def owner(self, call_id: str, state: RunState) -> str | None:
        """The child run whose pending call `call_id` is; None if it is this run's own (or
        nobody's: this run's checker then says so)."""
        if not self.store.children:
            return None
        if any(c.call_id == call_id and not delegated(c) for c in state.batch):
            return None
        found = owner_of(self._tree(state), call_id)
        return None if found in (None, state.run_id) else found

    def check(self, owner: str, request: DecideRequest) -> CallRecord:
        """The decision checked against the child run it is for, as a local parent checks it."""
        child = self.store.children.get(owner)
        if child is None:
            raise UnknownCall(f"run {owner} has not told its state yet: try again")
        queued = set(self.forwarded)
        return check_decision(child, request.call_id, request.decision, queued=queued).call

    def forward(self, owner: str, request: DecideRequest) -> CallRecord:
        """Send a checked decision to the run it is for."""
        record = self.check(owner, request)
        self.forwarded[request.call_id] = owner
        task = asyncio.create_task(_signal(owner, "decide", request))
        self._signals.add(task)  # kept until sent
        task.add_done_callback(self._signals.discard)
        return record

    # -- the tree ----------------------------------------------------------------------------

    def pending(self, state: RunState) -> list[ApprovalRequest]:
        """What waits for a decision in this run and its children (minus what was decided)."""
        if not self.store.children:
            return state.pending
        return [p for p in tree_pending(self._tree(state)) if p.call_id not in self.forwarded]

    def usage(self, state: RunState) -> UsageReport:
        return usage_report(self._tree(state))

    async def abort_unfinished(self, state: RunState) -> None:
        """A run that ended aborted or failed aborts the child runs still going."""
        if state.status not in ("aborted", "failed"):
            return
        reason = state.stop_reason or state.error or state.status
        actor = (state.transitions[-1].actor if state.transitions else None) or "system"
        why = f"its parent run {state.run_id} ended: {reason}"[:500]
        request = AbortRequest(reason=why, actor=actor)
        direct = self.started | {child for _, child in child_runs(state)}
        going = [c for c in direct if not self._ended(c)]
        for run_id in sorted(going):
            await _signal(run_id, "abort", request)

    def _ended(self, run_id: str) -> bool:
        child = self.store.children.get(run_id)
        if child is None or at_budget(child) is not None:  # one resting at the budget has not
            return False
        return child.status in ("done", "failed", "aborted")

    def _tree(self, state: RunState) -> RunTree:
        found: list[tuple[str, RunTree]] = []
        for key, child_id in child_runs(state):
            child = self.store.children.get(child_id)
            if child is not None:
                found.append((key, self._tree(child)))
        return RunTree(state=state, children=tuple(found))

    def _tree_pending(self) -> list[ApprovalRequest]:
        own = self.store.state
        return [] if own is None else tree_pending(self._tree(own))


def _below(abort: AbortRequest, store: WorkflowStore) -> AbortRequest:
    """The abort a child is sent when the run above it is aborted, by the same person."""
    run_id = store.state.run_id if store.state is not None else "?"
    return abort.evolve(reason=f"its parent run {run_id} was aborted: {abort.reason}"[:500])


async def _signal(run_id: str, name: str, request: DecideRequest | AbortRequest) -> None:
    try:
        await workflow.get_external_workflow_handle(run_id).signal(name, request)
    except FailureError:  # it ended meanwhile: nothing waits for this any more
        return
