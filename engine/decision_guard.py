"""A decision recorded in one step: what the one checker (`check_decision`) says of a waiting
run, kept with the run so a store can record a person's decision in one atomic statement.

A decision's validity depends on the run (the pending call, its digest, decisions already
queued, the forbidding rules) and on the decision's kind; an approval, a denial or an abort
carries nothing else to check (an edit's arguments and a result's value do). So whenever a
run is saved waiting for decisions, `decidable` asks the checker, for each call still without
a decision, which of those kinds it accepts with the call's digest, and the store keeps the
answer next to the run. A store that records decisions in one statement
(`Store.record_decision`, PostgreSQL) guards it by that answer: the run still waits, the call
is in it with this digest and accepts this kind, and the call leaves it as it is decided
(used once). A refused statement writes nothing; the caller then reads the run and lets the
checker say exactly why (`operations.record_decision`). Stores in one process (SQLite, memory)
call the checker themselves inside their transaction (`recorded`).
"""

from __future__ import annotations

from typing import Any

from loopstate.engine.approval import Abort, Approve, Decision, Deny
from loopstate.engine.decision_check import check_decision
from loopstate.engine.errors import DecisionError
from loopstate.engine.state import QueuedDecision, RunState
from loopstate.engine.tree import waits_on_child

QUICK = ("approve", "deny", "abort")
"""The kinds a store may record in one statement: nothing but the run decides them."""


def quick(decision: Decision, *, bound: bool) -> bool:
    """Whether `decision` may be recorded in one step (`Store.record_decision`): its kind
    carries nothing to check, and it names the digest the person saw if one is required."""
    return decision.kind in QUICK and not (
        bound and decision.digest is None and decision.kind != "abort"
    )


def decidable(state: RunState) -> dict[str, Any] | None:
    """For a top run waiting for decisions (not for a run it delegated to): each waiting
    call without a queued decision, by id, with its digest and the `QUICK` kinds the checker
    accepts for it. None: no decision on this run may be recorded in one statement."""
    if not _alone(state) or state.state != "awaiting_approval":
        return None
    queued = {q.call_id for q in state.inbox}
    calls: dict[str, Any] = {}
    for call in state.batch:
        if call.status != "awaiting" or call.call_id in queued:
            continue
        forms = (Approve(digest=call.digest), Deny("-", digest=call.digest), Abort("-"))
        kinds = [d.kind for d in forms if _accepted(state, call.call_id, d)]
        calls[call.call_id] = {"digest": call.digest, "kinds": kinds}
    return calls or None


def _alone(state: RunState) -> bool:
    """A top run that waits for no run it delegated to: recording a decision on it changes
    no other run (a sub-agent's last decision makes the top run of its tree ready)."""
    return state.parent is None and not waits_on_child(state)


def _accepted(state: RunState, call_id: str, decision: Decision) -> bool:
    try:
        check_decision(state, call_id, decision)
    except DecisionError:
        return False
    return True


def recorded(state: RunState, queued: QueuedDecision) -> RunState | None:
    """`state` with `queued` in its inbox (`queue_on`) if the checker accepts it and the run
    is a top run that waits for no other (`decidable`'s scope); None if not (nothing to
    record: the caller asks why, or takes the path that wakes a sub-agent's tree)."""
    if not _alone(state):
        return None
    try:
        call = check_decision(state, queued.call_id, queued.decision).call
    except DecisionError:
        return None
    return queue_on(state, queued, call.digest)


def queue_on(state: RunState, queued: QueuedDecision, digest: str) -> RunState:
    """`state` with `queued`, bound to the call's `digest` (what the person saw), in its inbox:
    a change of the run for everyone who follows it (listings, the event log)."""
    entry = queued.evolve(decision=queued.decision.model_copy(update={"digest": digest}))
    return state.evolve(inbox=(*state.inbox, entry), updated_at=max(queued.at, state.updated_at))
