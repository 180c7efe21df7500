"""`PostgresStore`: runs in PostgreSQL, shared by service processes on several hosts.

The rows are SQLite's (see `store_codec`): a header row per run, append-only message and
transition rows, one upserted row per call. Every write is one statement, so one round trip
(`postgres_sql`): a save updates the run's row only if the writer may (its lease, fencing)
and the stored counts are those it appends after (which the handle remembers from its last
load or save of the run), and appends what is new, all or nothing; a refused save asks why
(one more round trip, only then). `claim` leases ready runs with `FOR UPDATE SKIP LOCKED`, so
concurrent claimers never share one, and takes a run whose holder's session is gone without
waiting for its lease (see `postgres_sql`). `load` reads a run in one statement (one
snapshot). `release` of a run left ready notifies the workers that `listen` (LISTEN/NOTIFY).
The tables (`loopstate_*`) live in the connection's schema (`search_path`, which a DSN may
set: `?options=-csearch_path%3Dmyschema`). Needs the `loopstate[postgres]` extra (psycopg 3).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

try:
    import psycopg
    from psycopg import errors
except ImportError:  # pragma: no cover - depends on the environment
    raise ImportError("PostgresStore needs psycopg 3: pip install 'loopstate[postgres]'") from None

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
    changed_since,
    lease_is_live,
    pause_key,
)
from loopstate.engine.stores import postgres_upkeep as upkeep
from loopstate.engine.stores.codec import (
    decode_event,
    decode_run,
    definition_body,
    listed,
)
from loopstate.engine.stores.postgres_schema import EVENTS_LOCK, migrate
from loopstate.engine.stores.postgres_session import (
    connect,
    describe,
    first_line,
    relay,
    take_session,
)
from loopstate.engine.stores.postgres_sql import (
    CLAIM,
    CREATE,
    DEFINITION,
    EVENTS,
    HOLDER,
    KEEP_DEFINITION,
    KEPT,
    LAST_EVENT,
    LEASE,
    LOAD,
    RECORD_DECISION,
    RELEASE,
    RESERVE,
    RETAKE,
    SAVE,
    WAKE,
    list_query,
    write_params,
)

Connection = psycopg.AsyncConnection[tuple[Any, ...]]


class PostgresStore:
    """Runs in the PostgreSQL database at `dsn` (a `postgresql://` URL or `key=value` string).

    Tables are created, or migrated to this version's schema, on first use; a database
    migrated by a newer loopstate is refused. Errors name the database without its password.
    One connection per store object, used by one operation at a time; closing it (or the
    process ending) frees the leases it holds for other claimers at once.
    """

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.where = describe(dsn)
        self._conn: Connection | None = None
        self._session = 0
        self._lock = asyncio.Lock()
        self._counts: OrderedDict[str, tuple[int, int]] = OrderedDict()
        self._pauses: OrderedDict[str, PauseRequest | None] = OrderedDict()

    def __repr__(self) -> str:
        return f"PostgresStore({self.where!r})"

    # -- the Store port ----------------------------------------------------------------------

    async def create(self, state: RunState, *, owner: str, now: float, ttl: float) -> None:
        async with self._use() as db:
            params = write_params(
                state, owner=owner, until=now + ttl, session=self._session, first=(0, 0, 0)
            )
            try:
                await db.execute(CREATE, params)
            except errors.UniqueViolation:
                raise StoreError(f"run {state.run_id} already exists in {self.where}") from None
        self._remember(state.run_id, len(state.messages), len(state.transitions))

    async def save(self, state: RunState, *, owner: str, now: float, ttl: float) -> RunState:
        run_id, gone, read = state.run_id, None, state.revision
        for _ in range(3):
            counts = self._counts.get(run_id)
            if counts is None:
                counts = (await self._why_refused(run_id, owner, now, read))[1]
            if len(state.messages) < counts[0] or len(state.transitions) < counts[1]:
                raise StoreError(
                    f"run {run_id}: refusing to rewrite stored history in {self.where} "
                    f"({len(state.messages)} messages and {len(state.transitions)} transitions "
                    f"given, {counts[0]} and {counts[1]} stored)"
                )
            first = (*counts, state.batch_start)
            async with self._use() as db:
                params = write_params(
                    state, owner=owner, until=now + ttl, session=self._session, first=first
                )
                try:
                    found = await db.execute(SAVE, {**params, "now": now, "gone": gone})
                    written = await found.fetchone()
                except errors.UniqueViolation:  # a row already there: two writers raced
                    raise StoreError(
                        f"run {run_id}: refusing to rewrite stored history in {self.where}"
                    ) from None
            if written is not None and written[0]:
                self._remember(run_id, len(state.messages), len(state.transitions))
                self._note_pause(run_id, *written[1:])
                return state.evolve(revision=read + 1)
            self._counts.pop(run_id, None)
            gone, _ = await self._why_refused(run_id, owner, now, read)
        raise RunBusy(f"run {run_id} is busy: its lease changed hands while saving")

    async def renew(self, run_id: str, *, owner: str, now: float, ttl: float) -> None:
        await self._lease(run_id, owner=owner, now=now, ttl=ttl)

    async def load(self, run_id: str) -> RunState:
        async with self._use() as db:
            row = await (await db.execute(LOAD, (pause_key(run_id), run_id))).fetchone()
        if row is None:
            raise RunNotFound(f"no run {run_id!r} in {self.where}")
        return self._decoded(run_id, row)

    async def acquire(self, run_id: str, *, owner: str, now: float, ttl: float) -> RunState:
        gone = None
        for _ in range(3):
            async with self._use() as db:
                params = {"owner": owner, "until": now + ttl, "now": now, "gone": gone}
                params |= {"session": self._session, "run_id": run_id}
                async with db.pipeline():  # the lease and the read: one round trip
                    taken = await db.execute(LEASE, params)
                    loaded = await db.execute(LOAD, (pause_key(run_id), run_id))
                row = await loaded.fetchone() if await taken.fetchone() is not None else None
            if row is not None:
                return self._decoded(run_id, row)
            gone, _ = await self._why_refused(run_id, owner, now)
        raise RunBusy(f"run {run_id} is busy: its lease changed hands while taking it")

    async def _lease(self, run_id: str, *, owner: str, now: float, ttl: float) -> None:
        """Take or extend `owner`'s lease without loading the run (`acquire`, `renew`)."""
        gone = None
        for _ in range(3):
            async with self._use() as db:
                params = {"owner": owner, "until": now + ttl, "now": now, "gone": gone}
                params |= {"session": self._session, "run_id": run_id}
                if await (await db.execute(LEASE, params)).fetchone() is not None:
                    return
            gone, _ = await self._why_refused(run_id, owner, now)
        raise RunBusy(f"run {run_id} is busy: its lease changed hands while taking it")

    async def release(self, run_id: str, *, owner: str) -> None:
        async with self._use() as db:
            await db.execute(RELEASE, (run_id, owner))

    async def record_decision(self, run_id: str, queued: QueuedDecision) -> bool | None:
        decision = queued.decision
        params: dict[str, Any] = {"run_id": run_id, "call_id": queued.call_id}
        params |= {"kind": decision.kind, "queued": queued.model_dump_json()}
        params |= {"digest": decision.digest, "now": queued.at, "lock": EVENTS_LOCK}
        async with self._use() as db:
            row = await (await db.execute(RECORD_DECISION, params)).fetchone()
        return None if row is None else bool(row[0])

    async def claim(self, *, owner: str, now: float, ttl: float, limit: int) -> list[str]:
        async with self._use() as db:
            params = {"owner": owner, "until": now + ttl, "now": now, "limit": limit}
            found = await db.execute(CLAIM, {**params, "session": self._session})
            claimed = await found.fetchall()
        return [run_id for run_id, _ in sorted(claimed, key=lambda row: row[1])]

    async def list_runs(
        self,
        *,
        status: str | None = None,
        limit: int = 100,
        by: Order = "updated",
        cursor: Cursor | None = None,
    ) -> list[RunSummary]:
        sql, params = list_query(status, by, cursor, limit)
        async with self._use() as db:
            found = await (await db.execute(sql, params)).fetchall()
        return [listed(row, self.where) for row in found]

    async def events(self, *, after: int, limit: int = 1000) -> list[RunEvent]:
        async with self._use() as db:
            found = await (await db.execute(EVENTS, (after, limit))).fetchall()
        return [decode_event(row, self.where) for row in found]

    async def last_event_id(self) -> int:
        async with self._use() as db:
            row = await (await db.execute(LAST_EVENT)).fetchone()
        return 0 if row is None or row[0] is None else int(row[0])

    async def reserve_key(
        self, key: str, fingerprint: str, *, now: float, stale_s: float
    ) -> KeptAnswer | None:
        async with self._transaction() as db:
            if await (await db.execute(RESERVE, (key, fingerprint, now))).fetchone() is not None:
                return None
            row = await (await db.execute(KEPT, (key,))).fetchone()
            if row is not None and (row[1] is not None or row[3] > now - stale_s):
                body = None if row[2] is None else json.loads(row[2])
                return KeptAnswer(fingerprint=row[0], status=row[1], body=body, at=row[3])
            await db.execute(RETAKE, (key, fingerprint, now))
        return None

    async def keep_answer(self, key: str, status: int, body: dict[str, Any]) -> None:
        async with self._use() as db:
            await db.execute(
                "UPDATE loopstate_answers SET status = %s, body = %s WHERE key = %s",
                (status, json.dumps(body), key),
            )

    async def drop_key(self, key: str) -> None:
        async with self._use() as db:
            await db.execute("DELETE FROM loopstate_answers WHERE key = %s", (key,))

    async def ask_pause(self, run_id: str, *, by: str, now: float) -> None:
        self._pauses.pop(run_id, None)
        async with self._use() as db:
            await db.execute(RESERVE, (pause_key(run_id), by, now))

    async def pause_asked(self, run_id: str) -> PauseRequest | None:
        if run_id in self._pauses:  # as this handle's last save or load of the run read it
            return self._pauses.pop(run_id)
        async with self._use() as db:
            query = "SELECT fingerprint, at FROM loopstate_answers WHERE key = %s"
            row = await (await db.execute(query, (pause_key(run_id),))).fetchone()
        return None if row is None else PauseRequest(by=row[0], at=row[1])

    async def drop_pause(self, run_id: str) -> None:
        self._pauses.pop(run_id, None)
        await self.drop_key(pause_key(run_id))

    # -- retention and wake-ups --------------------------------------------------------------

    async def prune(
        self, *, before: float, keep_after: int | None = None, now: float | None = None
    ) -> Pruned:
        async with self._transaction() as db:
            return await upkeep.prune(db, before=before, keep_after=keep_after, now=now)

    async def keep_cursor(self, process: str, after: int | None, *, now: float, ttl: float) -> int:
        async with self._use() as db:
            return await upkeep.keep_cursor(db, process, after, until=now + ttl)

    async def pruned_upto(self) -> int:
        async with self._use() as db:
            row = await (await db.execute("SELECT max(upto) FROM loopstate_pruned")).fetchone()
        return 0 if row is None or row[0] is None else int(row[0])

    @asynccontextmanager
    async def listen(self, wake: Callable[[], None]) -> AsyncIterator[None]:
        """While inside, call `wake` whenever a run may have become ready (another process
        released it ready: a decision queued, a worker draining); on a connection of its own.
        A lost connection is logged and ends the wake-ups: a worker still polls."""
        async with await connect(self.dsn, self.where) as db:
            await db.execute(f"LISTEN {WAKE}")
            task = asyncio.create_task(relay(db, wake, self.where))
            try:
                yield
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    # -- run definitions ---------------------------------------------------------------------

    async def keep_definition(self, fingerprint: str, body: dict[str, Any]) -> None:
        async with self._use() as db:
            await db.execute(KEEP_DEFINITION, (fingerprint, json.dumps(body, sort_keys=True)))

    async def definition(self, fingerprint: str) -> dict[str, Any] | None:
        async with self._use() as db:
            row = await (await db.execute(DEFINITION, (fingerprint,))).fetchone()
        return None if row is None else definition_body(row[0])

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    # -- plumbing ----------------------------------------------------------------------------

    @asynccontextmanager
    async def _use(self) -> AsyncIterator[Connection]:
        """The store's connection for one statement (autocommit: one round trip); a database
        error becomes a `StoreError` naming the database."""
        async with self._lock:
            db = await self._connect()
            try:
                yield db
            except psycopg.Error as exc:
                if db.broken:
                    self._conn = None
                raise StoreError(f"{self.where}: {first_line(exc)}") from None

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[Connection]:
        """One transaction on this store's connection, rolled back on any error."""
        async with self._use() as db, db.transaction():
            yield db

    async def _connect(self) -> Connection:
        if self._conn is not None and not self._conn.closed:
            return self._conn
        db = await connect(self.dsn, self.where)
        try:
            await migrate(db, self.where)
            self._session = await take_session(db)
        except BaseException:
            await db.close()
            raise
        self._conn = db
        return db

    async def _why_refused(
        self, run_id: str, owner: str, now: float, revision: int | None = None
    ) -> tuple[str | None, tuple[int, int]]:
        """Why `owner` could not write the run: `RunNotFound`, `RunBusy` (a live holder, or a
        `revision` other than the stored one: written since), else the holder to take over if it
        is provably gone (`holder_gone`), and the stored counts."""
        async with self._use() as db:
            row = await (await db.execute(HOLDER, (run_id,))).fetchone()
        if row is None:
            raise RunNotFound(f"no run {run_id!r} in {self.where}")
        holder, until, messages, transitions, stored = row
        if lease_is_live(holder, until, owner=owner, now=now):
            raise RunBusy(f"run {run_id} is busy: {holder} holds it for {until - now:.1f} s more")
        if revision is not None and stored != revision:
            raise changed_since(run_id, stored, revision)
        self._remember(run_id, messages, transitions)
        return holder, (messages, transitions)

    def _decoded(self, run_id: str, row: tuple[Any, ...]) -> RunState:
        head, *tables, revision, by, at = row
        self._note_pause(run_id, by, at)
        pairs = [list(zip(tables[n] or [], tables[n + 1] or [], strict=True)) for n in (0, 2, 4)]
        state = decode_run(run_id, self.where, head, *pairs, revision=revision)
        self._remember(run_id, len(state.messages), len(state.transitions))
        return state

    def _note_pause(self, run_id: str, by: str | None, at: float | None) -> None:
        """The run's pause request as a save or load just read it: taken once by the next
        `pause_asked` instead of a round trip of its own (a request made since is seen at the
        boundary after the next save)."""
        self._pauses[run_id] = None if by is None or at is None else PauseRequest(by=by, at=at)
        if len(self._pauses) > REMEMBERED:
            self._pauses.popitem(last=False)

    def _remember(self, run_id: str, messages: int, transitions: int) -> None:
        """The counts the store holds for the run, as this handle last saw them: the next save
        appends after them (checked by the save itself)."""
        self._counts[run_id] = (messages, transitions)
        self._counts.move_to_end(run_id)
        if len(self._counts) > REMEMBERED:
            self._counts.popitem(last=False)


REMEMBERED = 10_000
"""Runs whose stored counts a handle remembers (beyond: one more round trip at a save)."""
