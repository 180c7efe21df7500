"""The store port. Its adapters live in `stores/`: memory, SQLite, PostgreSQL.

A store keeps each run as a small header, plus append-only messages and transitions, plus the
call records (upserted: the current batch's change as they are decided and run). `save` writes
only what is new since the store last saw the run (a store knows how many messages and
transitions it holds), in one atomic step, and renews the writer's lease: a process that lost
its lease cannot write (fencing). A long effect keeps its lease with `renew`.
Each write of a run (a save, a recorded decision) advances its `revision`, and a save names
the revision it was read at: a writer whose lease ran out while someone else wrote the run
(a decision recorded meanwhile changes neither count) is refused, never silently undoing it.

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
from loopstate.engine.errors import RunBusy, StoreError
from loopstate.engine.state import ENDED, QueuedDecision, RunState

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


def changed_since(run_id: str, stored: int, given: int) -> RunBusy:
    """The refusal of a save from a copy of the run read before its latest write."""
    return RunBusy(
        f"run {run_id} changed since this copy was read (revision {given}, stored {stored}): "
        "another writer saved it or a decision was recorded; read it again"
    )


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

    async def save(self, state: RunState, *, owner: str, now: float, ttl: float) -> RunState:
        """Append the messages and transitions the store does not hold yet, upsert the
        current batch's calls and the header, renew `owner`'s lease; all or nothing. Answers
        `state` at its new `revision`: the writer's next save starts from it.
        Raises `RunBusy` if another owner holds a live lease, or if the run was written since
        `state` was read (its `revision` is not the stored one: a decision recorded while the
        writer's lease had run out, another writer's save; reload it), `RunNotFound` if the
        run was never created, `StoreError` if `state` has fewer messages or transitions than
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

    async def keep_definition(self, fingerprint: str, body: dict[str, Any]) -> None:
        """Keep a run definition (`loopstate.engine.definition`) under its fingerprint, once:
        a fingerprint already kept is left as it is (its body is the same by construction)."""

    async def definition(self, fingerprint: str) -> dict[str, Any] | None:
        """The definition kept under `fingerprint`, None if there is none."""


CURSOR_TTL_S = 60.0
"""How long a published stream cursor holds without being published again (`keep_cursor`):
a process that died stops holding back pruning that much later."""


def live_cursors(cursors: dict[str, tuple[int, float]], now: float) -> list[int]:
    """The ids published stream cursors (`keep_cursor`: process → (after, until)) still keep."""
    return [after for after, until in cursors.values() if until > now]


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
class RecordsDecisions(Protocol):
    """A store that records a person's decision in one atomic step (every store here; on
    PostgreSQL one statement, so one round trip): see `engine/decision_guard`."""

    async def record_decision(self, run_id: str, queued: QueuedDecision) -> bool | None:
        """Append `queued` (bound to the call's digest) to the run's inbox if the one checker
        accepts it (`check_decision`: the run waits, the call waits with the decision's digest,
        accepts its kind, and has no decision yet) and no live lease holds the run, with the
        log entry, and wake the workers if the run is now `ready`; all or nothing, without
        taking the lease. Answers whether the run is now ready, or None if nothing was written
        (the caller reads the run and lets the checker say why). A decision and a deadline's
        expiry, or two decisions, racing for one call: exactly one is recorded."""
        ...


@runtime_checkable
class Prunable(Protocol):
    """A store whose event log and idempotency answers can be pruned (every store here)."""

    async def prune(
        self, *, before: float, keep_after: int | None = None, now: float | None = None
    ) -> Pruned:
        """Remove the log's entries written before `before`, but none with an id above
        `keep_after` nor above a cursor any process published that is still live at `now`
        (default: the system clock; see `keep_cursor`): a connected reader still needs those;
        and the idempotency answers kept since before `before`. Ids are never reused:
        `pruned_upto` says where the log now starts."""

    async def keep_cursor(self, process: str, after: int | None, *, now: float, ttl: float) -> int:
        """Publish that stream clients connected to `process` still need the log's entries
        after id `after` (None: it has none; its cursor is dropped), until `now + ttl` unless
        published again: a prune in any process keeps them. Answers `pruned_upto`, read once
        the cursor is in place (a prune either keeps what the cursor needs or is seen here)."""

    async def pruned_upto(self) -> int:
        """The highest id pruned from the log (0: none): a reader that saw less than it has
        missed entries and must start over (the service's `reset` event)."""


def __getattr__(name: str) -> Any:
    """`MemoryStore` moved to `engine/stores/memory.py`; its old address keeps working."""
    if name == "MemoryStore":
        from loopstate.engine.stores.memory import MemoryStore

        return MemoryStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
