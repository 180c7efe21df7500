"""Approval deadlines: a gated call that waits longer than its tool's `decide_within` (or the
run's default) is decided by its `on_expiry` — `Deny(...)`, `Abort()`, or `Escalate(to=...)`.

The deadline is stored with the pending call (`CallRecord.deadline`), so whoever drives runs
applies it: the worker and `loopstate serve` (`DeadlineWatch`, each second). An expiry is queued on
the run like any decision, through `queue_decision` (under the run's lease, checked by
`check_decision`), with actor `deadline`: a person's decision and an expiry racing for one
call → exactly one is recorded, the other is refused (`AlreadyDecided`) or finds the run busy
and looks again at the next poll. The loop then records `expired` instead of `decided`.
"""

from __future__ import annotations

from datetime import timedelta
from math import inf
from typing import Annotated, Literal

from pydantic import Field

from loopstate.engine.approval import Abort, Decision, Deny
from loopstate.engine.clock import Clock, system_clock
from loopstate.engine.data import Frozen
from loopstate.engine.errors import (
    DecisionError,
    DefinitionError,
    RunBusy,
    RunNotFound,
    RunNotResumable,
)
from loopstate.engine.logs import get_logger
from loopstate.engine.state import CallRecord, Deadline, RunState
from loopstate.engine.store import DEFAULT_LEASE_S, Store, lease_owner

DEADLINE = "deadline"
"""The actor an expiry is recorded with."""


class Escalate(Frozen):
    """On expiry, hand the call to `to` (a person or a queue, as the inbox names it): the call
    keeps waiting, its request says whom it was escalated to, with no further deadline."""

    kind: Literal["escalate"] = "escalate"
    to: str


Expiry = Annotated[Deny | Abort | Escalate, Field(discriminator="kind")]


def seconds(within: timedelta | float | None) -> float | None:
    """`decide_within` in seconds (a `timedelta` or a number of seconds)."""
    if within is None:
        return None
    return within.total_seconds() if isinstance(within, timedelta) else float(within)


def check_expiry(who: str, within: float | None, on_expiry: object) -> None:
    """Refuse a deadline that cannot work, when it is declared (`DefinitionError`)."""
    if within is not None and within <= 0:
        raise DefinitionError(f"{who}: decide_within must be positive")
    if on_expiry is not None and not isinstance(on_expiry, Deny | Abort | Escalate):
        raise DefinitionError(
            f"{who}: on_expiry must be Deny(...), Abort() or Escalate(to=...), "
            f"not {type(on_expiry).__name__}"
        )


def deadline_for(within: float | None, on_expiry: Expiry | None, now: float) -> Deadline | None:
    """The deadline a call that starts waiting at `now` gets (None: it waits as long as it
    takes). Without an `on_expiry`, an expired call is denied."""
    if within is None:
        return None
    expiry = on_expiry if on_expiry is not None else Deny("no decision in time")
    return Deadline(at=now + within, on_expiry=expiry.model_dump(mode="json"))


def due(state: RunState, now: float) -> list[CallRecord]:
    """The calls of `state` whose deadline has passed with no decision queued for them."""
    if state.state != "awaiting_approval":
        return []
    queued = {q.call_id for q in state.inbox}
    return [
        c
        for c in state.batch
        if c.status == "awaiting" and c.deadline is not None and c.deadline.at <= now
        and c.call_id not in queued
    ]  # fmt: skip


async def expire_due(store: Store, *, clock: Clock = system_clock, limit: int = 500) -> int:
    """Apply the expiry of every pending call whose deadline has passed, once; returns how
    many were applied. A run another process holds is looked at again next time."""
    applied = 0
    for summary in await store.list_runs(status="awaiting_approval", limit=limit):
        try:
            state = await store.load(summary.run_id)
            for call in due(state, clock()):
                applied += await _expire(store, state.run_id, call, clock)
        except (RunBusy, RunNotFound):
            continue
    return applied


class DeadlineWatch:
    """`expire_due` for a process that scans again and again (the worker, so `serve`): at most
    once every `every_s` seconds (deadlines are meant in seconds or more), a listing of the
    waiting runs, and a waiting run loaded again only when it changed (its `updated_at`) or
    its earliest deadline came: a scan of unchanged runs is one read of the store."""

    def __init__(self, store: Store, *, clock: Clock, every_s: float = 1.0) -> None:
        self.store, self.clock, self.every_s = store, clock, every_s
        self.scans = 0
        self._next = float("-inf")
        self._seen: dict[str, tuple[float, float]] = {}
        """Per waiting run: its `updated_at` when loaded, and its earliest deadline (inf: none)."""

    async def scan(self, *, limit: int = 500) -> int:
        """Apply the expiries due now (if a scan is due); how many were applied."""
        now = self.clock()
        if now < self._next:
            return 0
        self._next, self.scans, applied = now + self.every_s, self.scans + 1, 0
        waiting = await self.store.list_runs(status="awaiting_approval", limit=limit)
        seen, self._seen = self._seen, {}
        for summary in waiting:
            known = seen.get(summary.run_id)
            if known is not None and known[0] == summary.updated_at and known[1] > now:
                self._seen[summary.run_id] = known
                continue
            try:
                state = await self.store.load(summary.run_id)
                earliest = min((c.deadline.at for c in state.batch if c.deadline), default=inf)
                self._seen[summary.run_id] = (summary.updated_at, earliest)
                for call in due(state, now):
                    applied += await _expire(self.store, state.run_id, call, self.clock)
            except (RunBusy, RunNotFound):
                continue
        return applied


def escalated_to(call: CallRecord) -> str | None:
    """Whom `call`'s expiry hands it to (None: its expiry decides it, `expiry_decision`)."""
    expiry = call.deadline.on_expiry if call.deadline is not None else {}
    return str(expiry.get("to")) if expiry.get("kind") == "escalate" else None


def expiry_decision(call: CallRecord) -> Decision:
    """The decision `call`'s expiry records (a `Deny` or an `Abort`), with actor `deadline`."""
    from loopstate.engine.approval import as_decision

    assert call.deadline is not None
    return as_decision({**call.deadline.on_expiry, "by": None})


def escalated(call: CallRecord, to: str) -> CallRecord:
    """`call` handed to `to` on expiry: it keeps waiting, with no further deadline."""
    return call.evolve(
        deadline=None,
        metadata={**call.metadata, "escalated_to": to},
        reason=f"{call.reason} (escalated to {to}: no decision in time)",
    )


async def _expire(store: Store, run_id: str, call: CallRecord, clock: Clock) -> int:
    from loopstate.engine.operations import queue_decision

    try:
        to = escalated_to(call)
        if to is not None:
            await _escalate(store, run_id, call.call_id, to, clock)
        else:
            decision = expiry_decision(call)
            await queue_decision(store, run_id, call.call_id, decision, actor=DEADLINE, clock=clock)
    except (DecisionError, RunNotResumable) as exc:  # a decision won the race: nothing to do
        get_logger().info("expiry_refused", run_id=run_id, call_id=call.call_id, error=str(exc))
        return 0
    return 1


async def _escalate(store: Store, run_id: str, call_id: str, to: str, clock: Clock) -> None:
    owner = lease_owner()
    state = await store.acquire(run_id, owner=owner, now=clock(), ttl=DEFAULT_LEASE_S)
    try:
        call = next((c for c in due(state, clock()) if c.call_id == call_id), None)
        if call is None:
            raise RunNotResumable(f"call {call_id} of run {run_id} is no longer due")
        state = state.replace_call(escalated(call, to)).evolve(
            updated_at=max(clock(), state.updated_at)
        )
        await store.save(state, owner=owner, now=clock(), ttl=DEFAULT_LEASE_S)
    finally:
        await store.release(run_id, owner=owner)
