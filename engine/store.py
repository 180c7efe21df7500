"""The store port and the in-memory store. SQLite lives in `sqlite_store`.

A store keeps each run as a small header, plus append-only messages and transitions, plus the
call records (upserted: the current batch's change as they are decided and run). `save` writes
only what is new since the store last saw the run (a store knows how many messages and
transitions it holds), in one atomic step, and renews the writer's lease: a process that lost
its lease cannot write (fencing). A long effect keeps its lease with `renew`.

Any process may `claim` runs that are `ready` (see `ready`) and whose lease is free or expired:
each is leased to one claimer, so a run ready to continue is continued once.

Every `create` and `save` also appends one `RunEvent` to a store-wide log, in the same atomic
step, under an id that grows in commit order: a reader that has seen id n and reads
`events(after=n)` later misses nothing and sees nothing twice, whichever process wrote what.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Literal, Protocol, runtime_checkable

from loopstate.engine.data import Frozen
from loopstate.engine.errors import RunBusy, RunNotFound, StoreError
from loopstate.engine.state import ENDED, RunState

DEFAULT_LEASE_S = 60.0


def lease_owner() -> str:
    """A lease owner id for this process: `host:pid:random`."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def lease_is_live(holder: str | None, until: float, *, owner: str, now: float) -> bool:
    """Whether `holder`'s lease still excludes `owner`: it is someone else's, unexpired, and
    its process is not known to be dead (same host, pid gone: a crash; no need to wait)."""
    if holder is None or holder == owner or until <= now:
        return False
    return not holder_gone(holder)


def holder_gone(holder: str) -> bool:
    """Whether lease owner `holder` (`host:pid:…`) is provably gone: it ran on this host and
    its process no longer exists. Any other holder may be alive."""
    host, _, rest = holder.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def claimable(holder: str | None, until: float, *, owner: str, now: float) -> bool:
    """Whether `claim` may lease to `owner` a ready run `holder` leased until `until`: the
    lease expired, or its holder is someone else who is provably gone (`holder_gone`)."""
    return until <= now or (holder is not None and holder != owner and holder_gone(holder))


def check_append_only(stored: RunState, messages: int, transitions: int) -> None:
    """Refuse a save that holds fewer messages or transitions than are stored: history is
    append-only, and a shorter one comes from a writer that missed someone else's save."""
    if messages < len(stored.messages) or transitions < len(stored.transitions):
        raise StoreError(
            f"run {stored.run_id}: refusing to rewrite stored history "
            f"({messages} messages and {transitions} transitions given, "
            f"{len(stored.messages)} and {len(stored.transitions)} stored)"
        )


def ready(state: RunState) -> bool:
    """Whether the run can continue without anyone's input, once no live lease holds it:
    it is `running` (a holder that stopped before it did left it so), it awaits approval and
    every pending call has a queued decision, or it answered (an agent run that is `done`, a
    flow `awaiting_input`) and a user message was queued for it (`queue_message`). A child run
    (a sub-agent's, an agent phase's) is never ready on its own: its parent's run continues it,
    and the top run of its tree is ready once the child has every decision (`child_ready`)."""
    if state.parent is not None:
        return False
    if state.status == "running":
        return True
    answered = "awaiting_input" if state.flow is not None else "done"
    if state.queued_message and state.status == answered:
        return True
    if state.status != "awaiting_approval":
        return False
    if state.child_ready:
        return True
    awaiting = {c.call_id for c in state.batch if c.status == "awaiting"}
    return bool(awaiting) and awaiting <= {q.call_id for q in state.inbox}


class RunSummary(Frozen):
    """One run as `Store.list_runs` gives it: its id, machine, state, status and counts."""

    run_id: str
    machine: str
    state: str
    status: str
    steps: int
    pending: int
    created_at: float
    updated_at: float
    stop_reason: str | None = None
    problem: str | None = None
    """Set for a run the store cannot read (its status is then `damaged`): why, in one line.
    Listing shows such a run and goes on; its rows are left as they are."""


DAMAGED = "damaged"
"""The status a listing gives a run whose rows cannot be read (`RunSummary.problem`)."""


def summarize(state: RunState) -> RunSummary:
    return RunSummary(
        run_id=state.run_id,
        machine=state.machine,
        state=state.state,
        status=state.status,
        steps=state.steps,
        pending=len(state.pending),
        created_at=state.created_at,
        updated_at=state.updated_at,
        stop_reason=state.stop_reason,
    )


class RunEvent(Frozen):
    """One `create` or `save` of a run, as the store-wide log keeps it (`Store.events`).

    `id` is store-wide: it grows with every write of any run, in the order the writes were
    committed (a reader never finds a lower id appearing after a higher one)."""

    id: int
    run_id: str
    state: str
    status: str
    pending: int
    queued: int
    """Decisions queued for the run's pending calls (`queue_decision`), not yet applied."""
    seq: int
    """The run's last transition (its `seq`; 0: none yet)."""
    updated_at: float


def event_fields(state: RunState) -> dict[str, Any]:
    """The fields of the log entry for a write of `state`, all but its id (the store's): plain
    data, as it is built at every save."""
    ended = state.state in ENDED
    return {
        "run_id": state.run_id,
        "state": state.state,
        "status": state.status,
        "pending": 0 if ended else sum(1 for c in state.batch if c.status == "awaiting"),
        "queued": len(state.inbox),
        "seq": state.transitions[-1].seq if state.transitions else 0,
        "updated_at": state.updated_at,
    }


Order = Literal["updated", "created"]
"""How `list_runs` orders runs: most recently updated, or most recently created, first."""
Cursor = tuple[float, str]
"""Where a page of `list_runs` ended: the last run's (`updated_at` or `created_at`, `run_id`);
the next page holds the runs strictly after it in the same order."""


class KeptAnswer(Frozen):
    """What a store holds for an idempotency key (`Store.reserve_key`): the request's body
    `fingerprint`, and its answer (`status` None: the first request is still computing it)."""

    fingerprint: str
    status: int | None = None
    body: dict[str, Any] | None = None
    at: float


def pause_key(run_id: str) -> str:
    """Where a SQL store keeps a run's pause request: in its answers table, under a key no
    idempotency key takes (the service's keys are hex digests)."""
    return f"loopstate.pause {run_id}"


class PauseRequest(Frozen):
    """Someone asked the process driving a run to pause it at its next step boundary."""

    by: str
    at: float


def after_cursor(summary: RunSummary, by: Order, cursor: Cursor | None) -> bool:
    """Whether `summary` comes after `cursor` in `list_runs(by=by)` order (newest first)."""
    if cursor is None:
        return True
    at = summary.updated_at if by == "updated" else summary.created_at
    return (at, summary.run_id) < cursor


class Store(Protocol):
    """Where runs live (`SQLiteStore`, `PostgresStore`, `MemoryStore`): each run is saved
    append-only under a lease, so one process at a time drives it and any may resume it."""

    async def create(self, state: RunState, *, owner: str, now: float, ttl: float) -> None:
        """Store a new run and give `owner` its lease. Raises `StoreError` if the id exists."""

    async def save(self, state: RunState, *, owner: str, now: float, ttl: float) -> None:
        """Append the messages and transitions the store does not hold yet, upsert the
        current batch's calls and the header, renew `owner`'s lease; all or nothing.
        Raises `RunBusy` if another owner holds a live lease, `RunNotFound` if the run
        was never created, `StoreError` if `state` has fewer messages or transitions than
        are stored (history is append-only)."""

    async def renew(self, run_id: str, *, owner: str, now: float, ttl: float) -> None:
        """Extend `owner`'s lease while it works (e.g. during a long tool); `RunBusy` if
        another owner took it over, `RunNotFound` if there is no such run."""

    async def load(self, run_id: str) -> RunState:
        """The run as last saved. Raises `RunNotFound`, or `StoreError` for corrupt data."""

    async def acquire(self, run_id: str, *, owner: str, now: float, ttl: float) -> RunState:
        """Take the run's lease (free, expired, or already ours) and load it; `RunBusy` else."""

    async def release(self, run_id: str, *, owner: str) -> None:
        """Give the lease up if `owner` holds it."""

    async def list_runs(
        self,
        *,
        status: str | None = None,
        limit: int = 100,
        by: Order = "updated",
        cursor: Cursor | None = None,
    ) -> list[RunSummary]:
        """Most recently updated (`by="created"`: created) first, ties by `run_id` descending;
        with `cursor`, only the runs after it (see `Cursor`)."""

    async def claim(self, *, owner: str, now: float, ttl: float, limit: int) -> list[str]:
        """Lease to `owner` up to `limit` runs that are `ready` and whose lease is free or
        expired (a run `owner` holds is not claimed again), least recently updated first,
        and return their ids. Concurrent claimers never get the same run."""

    async def events(self, *, after: int, limit: int = 1000) -> list[RunEvent]:
        """Up to `limit` entries of the store-wide log with an id above `after`, in id order;
        only committed ones, and never one that a later call could find below an id this
        call returned (see `RunEvent`)."""

    async def last_event_id(self) -> int:
        """The id of the newest entry of the log (0: none)."""

    async def reserve_key(
        self, key: str, fingerprint: str, *, now: float, stale_s: float
    ) -> KeptAnswer | None:
        """Reserve the idempotency `key` for a request whose body has `fingerprint`: None if
        this call reserved it (the caller computes the answer, then `keep_answer` or
        `drop_key`), else what the key holds. A reservation without an answer for longer
        than `stale_s` (its holder died) is taken over: None."""

    async def keep_answer(self, key: str, status: int, body: dict[str, Any]) -> None:
        """Store the answer to the request that reserved `key`."""

    async def drop_key(self, key: str) -> None:
        """Forget `key` (its request failed without an answer worth repeating)."""

    async def ask_pause(self, run_id: str, *, by: str, now: float) -> None:
        """Ask the process driving the run to pause it at its next step boundary (the first
        request stands until the driver takes it, `drop_pause`)."""

    async def pause_asked(self, run_id: str) -> PauseRequest | None:
        """The pause asked of the run's driving process, if one waits (read each step)."""

    async def drop_pause(self, run_id: str) -> None:
        """Forget the run's pause request (taken, or stale when a drive begins)."""


class Pruned(Frozen):
    """What `Prunable.prune` removed."""

    events: int
    answers: int


@runtime_checkable
class Waking(Protocol):
    """A store that can tell a process when a run may have become ready for a worker (the
    PostgreSQL store: LISTEN/NOTIFY), so workers need not poll for it."""

    def listen(self, wake: Callable[[], None]) -> AbstractAsyncContextManager[None]:
        """While inside, call `wake` whenever another process left a run ready."""
        ...


@runtime_checkable
class Prunable(Protocol):
    """A store whose event log and idempotency answers can be pruned (every store here)."""

    async def prune(self, *, before: float, keep_after: int | None = None) -> Pruned:
        """Remove the log's entries written before `before`, but none with an id above
        `keep_after` (a connected reader still needs those), and the idempotency answers
        kept since before `before`. Ids are never reused: `pruned_upto` says where the log
        now starts."""

    async def pruned_upto(self) -> int:
        """The highest id pruned from the log (0: none): a reader that saw less than it has
        missed entries and must start over (the service's `reset` event)."""


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

    async def save(self, state: RunState, *, owner: str, now: float, ttl: float) -> None:
        stored = self._runs.get(state.run_id)
        if stored is None:
            raise RunNotFound(f"no run {state.run_id!r} in this store")
        self._check_lease(state.run_id, owner, now)
        check_append_only(stored, len(state.messages), len(state.transitions))
        self._runs[state.run_id] = state
        self._leases[state.run_id] = (owner, now + ttl)
        self._log(state)

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

    async def prune(self, *, before: float, keep_after: int | None = None) -> Pruned:
        upto = self._dropped + len(self._events) if keep_after is None else keep_after
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
