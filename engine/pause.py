"""Asking a run to pause, from any process: the request is kept in the store, and the process
driving the run takes it at its next step boundary (`machines/agent/pausing.py`)."""

from __future__ import annotations

from loopstate.engine.clock import Clock, system_clock
from loopstate.engine.errors import RunNotFound
from loopstate.engine.outside import outside_text
from loopstate.engine.state import RunState
from loopstate.engine.store import Store
from loopstate.engine.tree import waited_children


async def pause_run(store: Store, run_id: str, *, actor: str, clock: Clock = system_clock) -> bool:
    """Ask the run to pause at its next step boundary: True if it is running, or its child run
    it waits on works (the request is recorded; it rests in `paused` after its current step,
    or with the child after the child's, resumable), False if it is not (a run that waits for
    a decision or the user, or has ended, stays as it is). `RunNotFound` if there is no such
    run. A request no process takes (the run stopped meanwhile) is dropped by the next
    process that drives it."""
    if not await _working(store, await store.load(run_id)):
        return False
    await store.ask_pause(run_id, by=outside_text(actor), now=clock())
    return True


async def _working(store: Store, state: RunState) -> bool:
    """Whether the run works: it is running, or it waits only on the child run (a
    sub-agent's, an agent phase's) its resume continues, and that one works. The child
    reads the request at its next step boundary (a request asked of a run above it) and the
    runs above rest with it."""
    if state.status == "running":
        return True
    if state.status not in ("awaiting_approval", "paused"):
        return False
    for child_id in waited_children(state):
        try:
            child = await store.load(child_id)
        except RunNotFound:
            continue
        if child.status != "paused" and await _working(store, child):
            return True
    return False
