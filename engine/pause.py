"""Asking a run to pause, from any process: the request is kept in the store, and the process
driving the run takes it at its next step boundary (`machines/agent/pausing.py`)."""

from __future__ import annotations

from loopstate.engine.clock import Clock, system_clock
from loopstate.engine.outside import outside_text
from loopstate.engine.store import Store


async def pause_run(store: Store, run_id: str, *, actor: str, clock: Clock = system_clock) -> bool:
    """Ask the run to pause at its next step boundary: True if it is running (the request is
    recorded; it rests in `paused` after its current step, resumable), False if it is not (a
    run that waits for a decision or the user, or has ended, stays as it is). `RunNotFound`
    if there is no such run. A request no process takes (the run stopped meanwhile) is
    dropped by the next process that drives it."""
    state = await store.load(run_id)
    if state.status != "running":
        return False
    await store.ask_pause(run_id, by=outside_text(actor), now=clock())
    return True
