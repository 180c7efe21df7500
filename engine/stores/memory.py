"""`MemoryStore`: the store port in one process's memory (tests, examples, one-shot runs)."""

from __future__ import annotations

from typing import Any

from loopstate.engine.clock import system_clock
from loopstate.engine.decision_guard import recorded
from loopstate.engine.errors import RunBusy, RunNotFound, StoreError
from loopstate.engine.state import QueuedDecision, RunState
from loopstate.engine.store import (
    Cursor,
    KeptAnswer,
    Order,
    PauseRequest,
    Pruned,
    RunEvent,
    RunSummary,
    after_cursor,
    changed_since,
    check_append_only,
    claimable,
    event_fields,
    lease_is_live,
    live_cursors,
    ready,
    summarize,
)

MEMORY_LOG = 10_000
"""Entries of its event log a `MemoryStore` keeps (the newest)."""


class MemoryStore:
    """Runs in a dict. Stores the immutable `RunState` itself: saving copies nothing. Its
    event log keeps the newest `MEMORY_LOG` entries (one process: its readers keep up)."""

    def __init__(self) -> None:
        self._runs: dict[str, RunState] = {}
        self._leases: dict[str, tuple[str, float]] = {}
        self._events: list[dict[str, Any]] = []
        self._dropped = 0  # entries dropped from the log's start (ids 1 to _dropped)
        self._keys: dict[str, KeptAnswer] = {}
        self._pauses: dict[str, PauseRequest] = {}
        self._definitions: dict[str, dict[str, Any]] = {}
        self._cursors: dict[str, tuple[int, float]] = {}  # stream cursors: (after, until)

    def _check_lease(self, run_id: str, owner: str, now: float) -> None:
        holder, until = self._leases.get(run_id, (None, 0.0))
        if lease_is_live(holder, until, owner=owner, now=now):
            raise RunBusy(f"run {run_id} is busy: {holder} holds it")

    async def create(self, state: RunState, *, owner: str, now: float, ttl: float) -> None:
        if state.run_id in self._runs:
            raise StoreError(f"run {state.run_id} already exists")
        self._runs[state.run_id] = state
        self._leases[state.run_id] = (owner, now + ttl)
        self._log(state)

    async def save(self, state: RunState, *, owner: str, now: float, ttl: float) -> RunState:
        stored = self._runs.get(state.run_id)
        if stored is None:
            raise RunNotFound(f"no run {state.run_id!r} in this store")
        self._check_lease(state.run_id, owner, now)
        if stored.revision != state.revision:
            raise changed_since(state.run_id, stored.revision, state.revision)
        check_append_only(stored, len(state.messages), len(state.transitions))
        saved = state.evolve(revision=state.revision + 1)
        self._runs[state.run_id] = saved
        self._leases[state.run_id] = (owner, now + ttl)
        self._log(saved)
        return saved

    async def record_decision(self, run_id: str, queued: QueuedDecision) -> bool | None:
        stored = self._runs.get(run_id)
        holder, until = self._leases.get(run_id, (None, 0.0))
        if stored is None or lease_is_live(holder, until, owner="", now=queued.at):
            return None
        state = recorded(stored, queued)
        if state is None:
            return None
        state = state.evolve(revision=stored.revision + 1)
        self._runs[run_id] = state
        self._log(state)
        return ready(state)

    def _log(self, state: RunState) -> None:
        self._events.append(event_fields(state))
        if len(self._events) > 2 * MEMORY_LOG:
            self._dropped += len(self._events) - MEMORY_LOG
            del self._events[:-MEMORY_LOG]

    async def renew(self, run_id: str, *, owner: str, now: float, ttl: float) -> None:
        await self.load(run_id)
        self._check_lease(run_id, owner, now)
        self._leases[run_id] = (owner, now + ttl)

    async def load(self, run_id: str) -> RunState:
        try:
            return self._runs[run_id]
        except KeyError:
            raise RunNotFound(f"no run {run_id!r} in this store") from None

    async def acquire(self, run_id: str, *, owner: str, now: float, ttl: float) -> RunState:
        state = await self.load(run_id)
        self._check_lease(run_id, owner, now)
        self._leases[run_id] = (owner, now + ttl)
        return state

    async def release(self, run_id: str, *, owner: str) -> None:
        holder = self._leases.get(run_id)
        if holder is not None and holder[0] == owner:
            del self._leases[run_id]

    async def claim(self, *, owner: str, now: float, ttl: float, limit: int) -> list[str]:
        free = [
            r
            for r in self._runs.values()
            if ready(r)
            and claimable(*self._leases.get(r.run_id, (None, 0.0)), owner=owner, now=now)
        ]
        claimed = [r.run_id for r in sorted(free, key=lambda r: r.updated_at)[:limit]]
        for run_id in claimed:
            self._leases[run_id] = (owner, now + ttl)
        return claimed

    async def list_runs(
        self,
        *,
        status: str | None = None,
        limit: int = 100,
        by: Order = "updated",
        cursor: Cursor | None = None,
    ) -> list[RunSummary]:
        def key(r: RunState) -> Cursor:
            return (r.updated_at if by == "updated" else r.created_at, r.run_id)

        runs = (summarize(r) for r in sorted(self._runs.values(), key=key, reverse=True))
        return [
            r
            for r in runs
            if (status is None or r.status == status) and after_cursor(r, by, cursor)
        ][:limit]

    async def events(self, *, after: int, limit: int = 1000) -> list[RunEvent]:
        start = max(after, self._dropped)
        kept = self._events[start - self._dropped : start - self._dropped + limit]
        return [RunEvent(id=n, **fields) for n, fields in enumerate(kept, start + 1)]

    async def last_event_id(self) -> int:
        return self._dropped + len(self._events)

    async def prune(
        self, *, before: float, keep_after: int | None = None, now: float | None = None
    ) -> Pruned:
        upto = self._dropped + len(self._events) if keep_after is None else keep_after
        live = live_cursors(self._cursors, system_clock() if now is None else now)
        upto = min(upto, *live) if live else upto
        old = 0
        for fields in self._events[: max(0, upto - self._dropped)]:
            if fields["updated_at"] >= before:
                break
            old += 1
        del self._events[:old]
        self._dropped += old
        stale = [key for key, kept in self._keys.items() if kept.at < before]
        for key in stale:
            del self._keys[key]
        return Pruned(events=old, answers=len(stale))

    async def pruned_upto(self) -> int:
        return self._dropped

    async def keep_cursor(self, process: str, after: int | None, *, now: float, ttl: float) -> int:
        if after is None:
            self._cursors.pop(process, None)
        else:
            self._cursors[process] = (after, now + ttl)
        return self._dropped

    async def reserve_key(
        self, key: str, fingerprint: str, *, now: float, stale_s: float
    ) -> KeptAnswer | None:
        kept = self._keys.get(key)
        if kept is not None and (kept.status is not None or kept.at > now - stale_s):
            return kept
        self._keys[key] = KeptAnswer(fingerprint=fingerprint, at=now)
        return None

    async def keep_answer(self, key: str, status: int, body: dict[str, Any]) -> None:
        kept = self._keys[key]
        self._keys[key] = kept.evolve(status=status, body=body)

    async def drop_key(self, key: str) -> None:
        self._keys.pop(key, None)

    async def ask_pause(self, run_id: str, *, by: str, now: float) -> None:
        self._pauses.setdefault(run_id, PauseRequest(by=by, at=now))

    async def pause_asked(self, run_id: str) -> PauseRequest | None:
        return self._pauses.get(run_id)

    async def drop_pause(self, run_id: str) -> None:
        self._pauses.pop(run_id, None)

    async def keep_definition(self, fingerprint: str, body: dict[str, Any]) -> None:
        self._definitions.setdefault(fingerprint, body)

    async def definition(self, fingerprint: str) -> dict[str, Any] | None:
        return self._definitions.get(fingerprint)
