"""Operations on a stored run that need no model and no tools: queue a decision for a
suspended run, abort a run. The CLI, `Agent.abort`, `Flow.abort` (and later HTTP) use these.

Queued decisions are checked when they are recorded (`check_decision`: against what the person
saw, the call's digest, and the tool's stored schema) and bound to the call's digest; the run's
next `resume` applies them through the same decision path as any other decision.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import suppress
from typing import Any

from loopstate.engine.approval import Decision, as_decision
from loopstate.engine.clock import Clock, system_clock
from loopstate.engine.core import Cause
from loopstate.engine.decision_check import check_decision
from loopstate.engine.decision_guard import queue_on, quick
from loopstate.engine.errors import DecisionError, RunBusy, RunNotResumable
from loopstate.engine.outside import outside_text
from loopstate.engine.result import RunResult
from loopstate.engine.rule import stricter
from loopstate.engine.sanitize import storable_text
from loopstate.engine.state import ENDED, QueuedDecision, Revocation, RunState, Transition
from loopstate.engine.store import DEFAULT_LEASE_S, RecordsDecisions, Store, lease_owner, ready
from loopstate.engine.tree import delegated, owner_of, run_tree, waited_children, waits_on_child


async def queue_decision(
    store: Store,
    run_id: str,
    call_id: str,
    decision: Any,
    *,
    actor: str,
    clock: Clock = system_clock,
    wake: bool = True,
    bound: bool = False,
    routed: bool = True,
) -> RunState:
    """Record `decision` for a pending call of a suspended run; refused (`check_decision`'s
    `DecisionError`, nothing stored) if the call is unknown, not awaiting a decision, already
    has one queued, was decided for other arguments (or names none, if `bound`), or an edit
    does not fit the tool's schema. A call that
    waits in a run this one delegated to (a sub-agent's) is recorded on that run (unless not
    `routed`: the caller names the run the call waits in); once that run has every decision,
    the top run of its tree is marked ready (unless not `wake`: the caller is resuming it)."""
    decision = as_decision(decision)
    if routed and waits_on_child(await store.load(run_id)):
        run_id = owner_of(await run_tree(store, run_id), call_id) or run_id
    owner = lease_owner()
    state = await store.acquire(run_id, owner=owner, now=clock(), ttl=DEFAULT_LEASE_S)
    try:
        call = check_decision(state, call_id, decision, bound=bound).call
        queued = QueuedDecision(call_id=call_id, decision=decision, actor=actor, at=clock())
        state = queue_on(state, queued, call.digest)
        await store.save(state, owner=owner, now=clock(), ttl=DEFAULT_LEASE_S)
    finally:
        await store.release(run_id, owner=owner)
    if wake and state.parent is not None and decided(state):
        await _wake_top(store, state, clock)
    return state


async def record_decision(
    store: Store,
    run_id: str,
    call_id: str,
    decision: Any,
    *,
    actor: str,
    clock: Clock = system_clock,
    bound: bool = False,
) -> bool:
    """Record a decision for a pending call of run `run_id` (not routed: the call waits in
    that run), as `queue_decision` does; answers whether the run (or, for a sub-agent's run,
    the top run of its tree) can now continue. An approval, a denial or an abort is recorded
    by the store in one step when it can (`RecordsDecisions`: one round trip on PostgreSQL);
    if the store refuses, the run is read and the checker says why, or, if nothing is wrong
    (a live lease, a run saved before the store kept its guard), `queue_decision` records it."""
    decision = as_decision(decision)
    if isinstance(store, RecordsDecisions) and quick(decision, bound=bound):
        queued = QueuedDecision(call_id=call_id, decision=decision, actor=actor, at=clock())
        now_ready = await store.record_decision(run_id, queued)
        if now_ready is not None:
            return now_ready
        check_decision(await store.load(run_id), call_id, decision, bound=bound)
    state = await queue_decision(
        store, run_id, call_id, decision, actor=actor, clock=clock, bound=bound, routed=False
    )
    return ready(state) or (state.parent is not None and decided(state))


def decided(state: RunState) -> bool:
    """Whether every call of the batch that waits for a person has a queued decision."""
    waiting = {c.call_id for c in state.batch if c.status == "awaiting" and not delegated(c)}
    return waiting <= {q.call_id for q in state.inbox}


async def _wake_top(store: Store, child: RunState, clock: Clock) -> None:
    """Mark the top run of `child`'s tree ready to continue: resuming it continues the child."""
    top = child
    while top.parent is not None:
        top = await store.load(top.parent.run_id)
    owner = lease_owner()
    try:
        state = await store.acquire(top.run_id, owner=owner, now=clock(), ttl=DEFAULT_LEASE_S)
    except RunBusy:
        return  # a process drives the tree now: it continues the child itself
    try:
        now = max(clock(), state.updated_at)
        await store.save(
            state.evolve(child_ready=True, updated_at=now),
            owner=owner,
            now=clock(),
            ttl=DEFAULT_LEASE_S,
        )
    finally:
        await store.release(top.run_id, owner=owner)


Routed = dict[str, dict[str, Decision]]
"""Decisions for the calls of child runs: by child run id, then call id."""


async def route_decisions(
    store: Store, state: RunState, decisions: Mapping[str, Any] | None
) -> tuple[dict[str, Any] | None, Routed]:
    """Split `decisions` (by call id) given to the run `state` into its own and those for
    calls that wait in runs it delegated to, each checked as `queue_decision` would
    (`DecisionError` before anything is recorded), with the rules of `state` besides the
    child's own."""
    if not decisions or not waits_on_child(state):
        return (dict(decisions) if decisions else None), {}
    tree = await run_tree(store, state.run_id)
    own: dict[str, Any] = {}
    routed: Routed = {}
    for call_id, decision in decisions.items():
        target = owner_of(tree, call_id)
        if target is None or target == state.run_id:
            own[call_id] = decision
        else:
            routed.setdefault(target, {})[call_id] = as_decision(decision)
    for node in tree.walk():
        # the rules of the run resumed hold below it (they may be stricter than when the
        # child started): a call they forbid is refused before anything is recorded
        child = node.state.evolve(rules=stricter(state.rules, node.state.rules))
        for call_id, decision in routed.get(node.state.run_id, {}).items():
            check_decision(child, call_id, decision)
    return own, routed


async def queue_routed(
    store: Store, routed: Routed, *, actor: str, clock: Clock = system_clock
) -> None:
    """Record the decisions `route_decisions` sent to child runs; applied when each resumes."""
    for run_id, decisions in routed.items():
        for call_id, decision in decisions.items():
            await queue_decision(
                store, run_id, call_id, decision, actor=actor, clock=clock, wake=False
            )


async def queue_message(
    store: Store, run_id: str, text: str, *, clock: Clock = system_clock
) -> RunState:
    """Queue the user's next message for a run that answered (an agent run that is `done`, a
    flow `awaiting_input`): the run becomes ready, and the next `resume` (a worker's, any
    process's) continues the conversation with it. `RunNotResumable` if the run cannot take
    a message or already has one queued; nothing is stored then."""
    owner = lease_owner()
    state = await store.acquire(run_id, owner=owner, now=clock(), ttl=DEFAULT_LEASE_S)
    try:
        if not text.strip():
            raise RunNotResumable(f"run {run_id}: the message is empty; say something")
        answered = "awaiting_input" if state.flow is not None else "done"
        if state.status != answered:
            raise RunNotResumable(
                f"run {run_id} is {state.status}: only a run that answered takes a message"
            )
        if state.queued_message is not None:
            raise RunNotResumable(f"run {run_id} already has a message waiting to be taken")
        state = state.evolve(queued_message=storable_text(text), updated_at=clock())
        await store.save(state, owner=owner, now=clock(), ttl=DEFAULT_LEASE_S)
        return state
    finally:
        await store.release(run_id, owner=owner)


async def abort_run(
    store: Store, run_id: str, reason: str, *, actor: str, clock: Clock = system_clock
) -> RunResult:
    """End a suspended or interrupted run of any kind in `aborted`: no model call, no tool.

    Every non-final state of every machine loopstate drives accepts `abort` into `aborted`
    (checked when a machine is built), so the transitions are recorded without the machine:
    the agent loop's (if it has not ended), then a flow's phase. The sub-agents' runs it
    waits for are aborted too; aborting a sub-agent's run aborts its whole tree, from the
    top (an abort stops the job: the runs above must not go on as if it had failed)."""
    reason = outside_text(reason)  # the entry rule for outside text (engine/outside.py)
    ended = await _abort_down(store, run_id, Cause(reason, actor), clock)
    link = ended.parent
    if link is not None:
        top = ended
        while top.parent is not None:
            top = await store.load(top.parent.run_id)
        why = f"sub-agent {link.name} (run {run_id}) was aborted: {reason}"
        with suppress(RunNotResumable):  # the top has ended: nothing above goes on
            await _abort_down(store, top.run_id, Cause(why, actor), clock)
    return RunResult.of(ended)


async def _abort_down(store: Store, run_id: str, cause: Cause, clock: Clock) -> RunState:
    """Abort `run_id` and every run it waits for (those that have ended stay as they are)."""
    owner = lease_owner()
    state = await store.acquire(run_id, owner=owner, now=clock(), ttl=DEFAULT_LEASE_S)
    try:
        ended = aborted(state, cause, clock())
        await store.save(ended, owner=owner, now=clock(), ttl=DEFAULT_LEASE_S)
    finally:
        await store.release(run_id, owner=owner)
    for child in waited_children(state):
        with suppress(RunNotResumable):  # the run below that was aborted first
            await _abort_down(store, child, cause, clock)
    return ended


def aborted(state: RunState, cause: Cause, now: float) -> RunState:
    """`state` moved to `aborted` by the `abort` event, with its transitions recorded;
    `RunNotResumable` if it has ended."""
    flow = state.flow
    if (flow is not None and flow.phase in ENDED) or (flow is None and state.state in ENDED):
        raise RunNotResumable(f"run {state.run_id} has ended ({state.phase or state.state})")
    steps: list[tuple[str, str]] = []
    if state.state not in ENDED:
        steps.append((state.state, "aborted"))
    if flow is not None:
        steps.append((flow.phase, "aborted"))
    transitions = list(state.transitions)
    for source, target in steps:
        transitions.append(
            Transition(
                seq=len(transitions) + 1,
                source=source,
                target=target,
                event="abort",
                at=now,
                reason=cause.reason,
                actor=cause.actor,
            )
        )
    return state.evolve(
        state="aborted",
        flow=None if flow is None else flow.evolve(phase="aborted", awaiting_input=False),
        stop_reason=f"aborted: {cause.reason}",
        transitions=tuple(transitions),
        updated_at=now,
    )


async def forget_decision(
    store: Store,
    run_id: str,
    tool: str | None = None,
    *,
    rule: str | None = None,
    actor: str = "api",
    reason: str = "",
    clock: Clock = system_clock,
) -> RunState:
    """Revoke the run's standing decision for `tool`, or the remembered rule named `rule`
    (one of the two): later calls it covered wait for a decision again. The revocation is
    recorded on it (who, when, why); it is not deleted. `DecisionError` if none is in force."""
    if (tool is None) == (rule is None):
        raise DecisionError("forget takes a tool or a rule (one of the two)")
    subject = str(tool) if rule is None else f"rule {rule}"
    owner = lease_owner()
    state = await store.acquire(run_id, owner=owner, now=clock(), ttl=DEFAULT_LEASE_S)
    try:
        active = [r for r in state.remembered if r.revoked is None]
        if not any(r.subject == subject for r in active):
            standing = ", ".join(r.subject for r in active) or "none"
            raise DecisionError(
                f"run {run_id} has no remembered decision for {subject!r} (remembered: {standing})"
            )
        now = clock()
        revoked = Revocation(by=actor, at=now, reason=storable_text(reason))
        remembered = tuple(
            r.evolve(revoked=revoked) if r.revoked is None and r.subject == subject else r
            for r in state.remembered
        )
        state = state.evolve(remembered=remembered, updated_at=max(now, state.updated_at))
        await store.save(state, owner=owner, now=now, ttl=DEFAULT_LEASE_S)
        return state
    finally:
        await store.release(run_id, owner=owner)
