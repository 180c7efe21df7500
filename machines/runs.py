"""Operations on stored runs that need no model: queue a decision for a suspended run, abort.

Queued decisions are applied, in order and each with its actor, by the next `resume`; they
are bound to the call's argument digest at the time they were recorded.
"""

from __future__ import annotations

from loopstate.engine.approval import Decision
from loopstate.engine.clock import Clock, system_clock
from loopstate.engine.errors import DecisionError, RunNotResumable
from loopstate.engine.model import ModelRequest, ModelResponse
from loopstate.engine.result import RunResult
from loopstate.engine.runner import FINAL, RunConfig, Runner
from loopstate.engine.state import QueuedDecision, RunState, Transition
from loopstate.engine.store import DEFAULT_LEASE_S, Store, lease_owner
from loopstate.machines.agent_loop import AgentLoop


async def queue_decision(
    store: Store,
    run_id: str,
    call_id: str,
    decision: Decision,
    *,
    actor: str,
    clock: Clock = system_clock,
) -> RunState:
    """Record `decision` for a pending call of a suspended run; refused (DecisionError) if the
    call is unknown, not awaiting a decision, or already has one queued."""
    owner = lease_owner()
    state = await store.acquire(run_id, owner=owner, now=clock(), ttl=DEFAULT_LEASE_S)
    try:
        if state.state != "awaiting_approval":
            raise RunNotResumable(f"run {run_id} is {state.state}, not awaiting approval")
        call = next((c for c in state.batch if c.call_id == call_id), None)
        if call is None:
            pending = ", ".join(p.call_id for p in state.pending) or "none"
            raise DecisionError(f"run {run_id} has no call {call_id} (pending: {pending})")
        if call.status != "awaiting" or any(q.call_id == call_id for q in state.inbox):
            raise DecisionError(f"call {call_id} of run {run_id} is already decided")
        bound = decision.model_copy(update={"digest": call.digest})
        queued = QueuedDecision(call_id=call_id, decision=bound, actor=actor, at=clock())
        state = state.evolve(inbox=(*state.inbox, queued))
        await store.save(
            state,
            owner=owner,
            now=clock(),
            ttl=DEFAULT_LEASE_S,
        )
        return state
    finally:
        await store.release(run_id, owner=owner)


async def abort_run(
    store: Store, run_id: str, reason: str, *, actor: str, clock: Clock = system_clock
) -> RunResult:
    """End a suspended or interrupted run in `aborted`: no model call, no tool."""
    owner = lease_owner()
    state = await store.acquire(run_id, owner=owner, now=clock(), ttl=DEFAULT_LEASE_S)
    if state.state in FINAL and state.phase in (None, *FINAL):
        await store.release(run_id, owner=owner)
        raise RunNotResumable(f"run {run_id} has ended ({state.phase or state.state})")
    if state.phase is not None:
        return await _abort_flow(store, state, reason, actor=actor, owner=owner, clock=clock)
    config = RunConfig(
        model=_NoModel(),
        machine=lambda value: AgentLoop(start_value=value),
        store=store,
        clock=clock,
        owner=owner,
    )
    return await Runner(config, state).abort(reason, actor=actor)


async def _abort_flow(
    store: Store, state: RunState, reason: str, *, actor: str, owner: str, clock: Clock
) -> RunResult:
    """A flow run: every phase of a flow machine has `abort` to `aborted` (checked when the
    flow is built), so the phase moves there directly; no model, no tool."""
    now = clock()
    step = Transition(seq=len(state.transitions) + 1, source=str(state.phase), target="aborted",
                      event="abort", at=now, reason=reason, actor=actor)  # fmt: skip
    ended = state.evolve(
        state="aborted",
        phase="aborted",
        stop_reason=f"aborted: {reason}",
        transitions=(*state.transitions, step),
        updated_at=now,
    )
    try:
        await store.save(ended, owner=owner, now=now, ttl=DEFAULT_LEASE_S)
    finally:
        await store.release(state.run_id, owner=owner)
    return RunResult.of(ended)


class _NoModel:
    """Aborting never calls a model; this one says so if anything tries."""

    name = "none"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        raise AssertionError("aborting a run must not call a model")
