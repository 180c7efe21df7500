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

A pause asked of a run above (a parent agent, a flow, at any depth) while a child run works
reaches the child the same way: at each boundary a child reads its ancestors' requests too
(theirs are left for them), pauses, and each run above rests with it (`with_child`), taking
its own request. A request older than the child's drive is not the child's to take: the run
it was asked of takes it at its own next boundary, as a lone run does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loopstate.engine.core import Cause
from loopstate.engine.errors import RunNotFound
from loopstate.engine.store import PauseRequest
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
        self._above: tuple[str, ...] | None = None
        """The runs above this one, its parent first (read once, when first needed)."""

    async def due(self) -> bool:
        """Pause now if asked, of this run or of one above it (True: the run rests in
        `paused`, saved, its own request taken)."""
        loop = self.loop
        if loop.state.state not in _BOUNDARIES:
            return False
        store, run_id = loop.config.options.store, loop.state.run_id
        request = await store.pause_asked(run_id)
        if request is not None and request.at < self.since:
            await store.drop_pause(run_id)
            request = None
        asked = (run_id, request) if request is not None else await self._asked_above()
        if asked is None:
            return False
        of, request = asked
        loop.state = withdrawn(loop.state)
        why = "pause asked" if of == run_id else f"pause asked of run {of}"
        loop.send(Cause(why, request.by), loop.machine.pause)
        await loop.core.save()
        if of == run_id:
            await store.drop_pause(run_id)
        return True

    async def _asked_above(self) -> tuple[str, PauseRequest] | None:
        """The nearest run above this one asked to pause during this drive, and its request
        (left in the store: that run takes it when it rests with this one)."""
        store = self.loop.config.options.store
        for run_id in await self._ancestors():
            request = await store.pause_asked(run_id)
            if request is not None and request.at >= self.since:
                return run_id, request
        return None

    async def _ancestors(self) -> tuple[str, ...]:
        if self._above is None:
            store, found = self.loop.config.options.store, list[str]()
            link = self.loop.state.parent
            while link is not None and link.run_id not in found:
                found.append(link.run_id)
                try:
                    link = (await store.load(link.run_id)).parent
                except RunNotFound:  # a tree this store holds only part of
                    break
            self._above = tuple(found)
        return self._above

    async def rest(self) -> bool:
        """The step of `paused`: wait (only a resume leaves it, through `unpause`)."""
        return False

    async def with_child(self, cause: Cause) -> None:
        """Rest in `paused` because a sub-agent's run paused (`cause` says which, and who
        paused it): the batch's calls stay as they are, the child's waiting for it. A pause
        asked of this run (which the child took) is taken too."""
        loop = self.loop
        loop.state = withdrawn(loop.state)
        loop.send(cause, loop.machine.pause)
        await loop.core.save()
        await loop.config.options.store.drop_pause(loop.state.run_id)

    async def unpause(self, *, actor: str) -> None:
        """Go back to the step the run paused before (`paused` → thinking or executing_tool,
        or awaiting_approval when the batch waits for a paused sub-agent's run)."""
        loop = self.loop
        batch = has_batch(loop.state)
        child = not batch and any(map(delegated, loop.state.batch))
        cause = Cause("resumed after a pause", actor)
        loop.send(cause, loop.machine.unpause, batch=batch, child=child)
        await loop.core.save()
