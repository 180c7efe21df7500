"""A pause asked of a run whose child workflow works reaches that child, as a pause asked of a
parent in this process does (there the child reads its ancestors' requests: `LoopPause`).

    parent, waiting for its child ◀── Update (or Signal) `pause`
       └── Signal `pause` ──▶ child: at its next step boundary, rests in `paused`
       ◀── Signal `child`: paused ──┘   (so does its own child first, if it waits for one)
    rests in `paused` too, its call waiting for the child (a flow: in that phase), its request
    taken
       │  Update `resume`: `unpause` back to `awaiting_approval` (a flow stays in the phase)
       └── Signal `resume` ──▶ the same child run goes on; the parent waits for its next report

A child paused by its own id is waited for as before (its own resume continues it). A parent
resumed, waiting again for its working child (`awaiting_approval`, or a flow `paused` in the
phase), may be paused again (`works_below`). A history from before this (`PAUSE_DOWN`
unpatched) keeps its commands: the parent kept the request while it waited, and took it at
its own next boundary.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from temporalio import workflow
from temporalio.exceptions import FailureError

from loopstate.engine.state import RunState
from loopstate.engine.store import PauseRequest
from loopstate.engine.tree import waited_children
from loopstate.machines.agent.loop import AgentLoop
from loopstate.temporal.data import PauseRunRequest, ResumeRunRequest

if TYPE_CHECKING:
    from loopstate.temporal.child_budget import Raising
    from loopstate.temporal.ports import WorkflowStore

PAUSE_DOWN = "loopstate-pause-reaches-children"
"""The patch (`workflow.patched`) from which a run passes a pause asked of it down to the child
workflow it waits for, rests with a paused child, and sends its resume down."""


class PauseDown:
    """One run's side: the pause requests it passed down, and whether it may (the patch, read
    once, when a pause first concerns a child it waits for)."""

    def __init__(self, store: WorkflowStore, raising: Raising) -> None:
        self.store = store
        self.raising = raising
        """The children sent a resume, until they tell how they stand since."""
        self.on: bool | None = None
        self.sent: dict[str, PauseRequest] = {}
        """Child run id → the request last passed down to it."""

    def wakes(self, run_id: str) -> bool:
        """Whether a wait for the child `run_id` must look again (a wait condition: it
        decides nothing): a pause asked of this run is not passed down to it yet."""
        return self.on is not False and self._unsent(run_id)

    def rests(self, child: RunState | None) -> bool:
        """Whether the child's report ends the wait: it is paused by a pause this run passed
        down (a child paused by its own id is waited for, as before, until it goes on)."""
        return self.on is True and child is not None and self._paused_by_us(child)

    def _paused_by_us(self, child: RunState) -> bool:
        return child.status == AgentLoop.paused.id and child.run_id in self.sent

    def works_below(self, state: RunState) -> bool:
        """Whether `state` (not running itself) waits on a child that works: one sent a resume
        that has not told how it stands since (a child tells its parent when it stops), or
        one that last told it runs. A pause asked of it goes down to that child (from the
        patch on)."""
        working = False
        for run_id in waited_children(state):
            child = self.store.children.get(run_id)
            going = child is not None and child.status == "running"
            working = working or going or self.raising.waits(run_id)
        return working and self.enabled()

    def enabled(self) -> bool:
        if self.on is None:
            self.on = workflow.patched(PAUSE_DOWN)
        return self.on

    async def pass_down(self, run_id: str) -> None:
        """Send the pause asked of this run to the child `run_id`, once per request."""
        asked = self.store.pause_request
        if asked is None or not self._unsent(run_id):
            return
        self.sent[run_id] = asked
        if self.enabled():
            await _signal(run_id, "pause", PauseRunRequest(actor=asked.by))

    def _unsent(self, run_id: str) -> bool:
        asked = self.store.pause_request
        return asked is not None and self.sent.get(run_id) != asked

    async def resume(self, state: RunState, actor: str) -> bool:
        """A resumed run that waits for paused children sends them its resume (True); each
        goes on and the run waits for its next report."""
        paused = [
            child
            for run_id in waited_children(state)
            if (child := self.store.children.get(run_id)) is not None and self._paused_by_us(child)
        ]
        if not paused or not self.enabled():
            return False
        for child in paused:
            self.raising.sent[child.run_id] = len(child.transitions)
            if not await _signal(child.run_id, "resume", ResumeRunRequest(actor=actor)):
                del self.raising.sent[child.run_id]  # it ended meanwhile (aborted): its report says
        return True


async def _signal(run_id: str, name: str, request: PauseRunRequest | ResumeRunRequest) -> bool:
    try:
        await workflow.get_external_workflow_handle(run_id).signal(name, request)
    except FailureError:  # it ended meanwhile
        return False
    return True
