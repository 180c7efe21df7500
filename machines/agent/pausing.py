"""Pause: a run asked (from any process, through the store: `Agent.pause`, `loopstate pause`,
`POST /api/runs/{id}/pause`) to stop at its next step boundary.

The process driving the run reads the request before each model call and each batch of tools
(`LoopPause.due`): the run goes `pause` → `paused` with nothing in flight (a batch's saved
intents withdrawn), is saved, and the drive stops, releasing the lease. A resume sends
`unpause` back to the step it stopped before. A request older than the drive (made while no
process drove the run) is stale and dropped: a run that waits (for a decision, for the user)
is not paused and stays as it is.

A sub-agent's run paused by its own id rests its parent in `paused` too (`LoopPause.with_child`,
as a child at the tree's budget does), the parent's call waiting for it: the parent's resume
goes `unpause` back to `awaiting_approval`, where the same child run is resumed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loopstate.engine.core import Cause
from loopstate.engine.tree import delegated
from loopstate.machines.agent.limits import has_batch, withdrawn
from loopstate.machines.agent.loop import AgentLoop

if TYPE_CHECKING:
    from loopstate.machines.agent.steps import LoopSteps

_BOUNDARIES = frozenset({AgentLoop.thinking.id, AgentLoop.executing_tool.id})


class LoopPause:
    """One loop's side of a pause: it reads the store's request; `LoopSteps` commits."""

    def __init__(self, loop: LoopSteps) -> None:
        self.loop = loop
        self.since = loop.config.options.clock()
        """When this process began driving the run: an older request is stale."""

    async def due(self) -> bool:
        """Pause now if asked (True: the run rests in `paused`, saved, request taken)."""
        loop = self.loop
        if loop.state.state not in _BOUNDARIES:
            return False
        store, run_id = loop.config.options.store, loop.state.run_id
        request = await store.pause_asked(run_id)
        if request is None:
            return False
        if request.at < self.since:
            await store.drop_pause(run_id)
            return False
        loop.state = withdrawn(loop.state)
        loop.send(Cause("pause asked", request.by), loop.machine.pause)
        await loop.core.save()
        await store.drop_pause(run_id)
        return True

    async def rest(self) -> bool:
        """The step of `paused`: wait (only a resume leaves it, through `unpause`)."""
        return False

    async def with_child(self, cause: Cause) -> None:
        """Rest in `paused` because a sub-agent's run paused (`cause` says which, and who
        paused it): the batch's calls stay as they are, the child's waiting for it."""
        loop = self.loop
        loop.state = withdrawn(loop.state)
        loop.send(cause, loop.machine.pause)
        await loop.core.save()

    async def unpause(self, *, actor: str) -> None:
        """Go back to the step the run paused before (`paused` → thinking or executing_tool,
        or awaiting_approval when the batch waits for a paused sub-agent's run)."""
        loop = self.loop
        batch = has_batch(loop.state)
        child = not batch and any(map(delegated, loop.state.batch))
        cause = Cause("resumed after a pause", actor)
        loop.send(cause, loop.machine.unpause, batch=batch, child=child)
        await loop.core.save()
