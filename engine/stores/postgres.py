"""`PostgresStore`: runs in PostgreSQL, shared by service processes on several hosts.

The rows are SQLite's (see `store_codec`): a header row per run, append-only message and
transition rows, one upserted row per call. A save is one transaction that locks the run's
row (`FOR UPDATE`), checks the writer's lease (fencing) and appends what is new; `claim`
leases ready runs with `FOR UPDATE SKIP LOCKED`, so concurrent claimers never share one.
Each write appends to the store-wide event log last, under a transaction-scoped advisory
lock held until it commits: ids are drawn one writer at a time, so they are committed in
id order and a reader polling `events(after=n)` can never skip one committed late (the
price: the last statement and commit of concurrent saves are serialized, not their work).
The tables (`loopstate_*`) live in the connection's schema (`search_path`, which a DSN may
set: `?options=-csearch_path%3Dmyschema`). Needs the `loopstate[postgres]` extra (psycopg 3).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

try:
    import psycopg
    from psycopg import conninfo, errors
except ImportError:  # pragma: no cover - depends on the environment
    raise ImportError("PostgresStore needs psycopg 3: pip install 'loopstate[postgres]'") from None

from loopstate.engine.errors import RunBusy, RunNotFound, StoreError
from loopstate.engine.state import RunState
from loopstate.engine.store import (
    Cursor,
    KeptAnswer,
    Order,
    PauseRequest,
    RunEvent,
    RunSummary,
    lease_is_live,
    pause_key,
    ready,
)
from loopstate.engine.stores.codec import (
    LISTED,
    decode_event,
    event_row,
    header,
    listed,
    rows,
    summary_columns,
    transition_rows,
)
from loopstate.engine.stores.postgres_schema import EVENTS_LOCK, migrate, read_run

Connection = psycopg.AsyncConnection[tuple[Any, ...]]

_COLUMNS = (
    "machine, state, status, steps, pending, created_at, updated_at, stop_reason, header, "
    "message_count, transition_count, lease_owner, lease_until, ready"
)
_INSERT = (
    f"INSERT INTO loopstate_runs (run_id, {_COLUMNS}) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
_UPDATE = (
    "UPDATE loopstate_runs SET machine = %s, state = %s, status = %s, steps = %s, "
    "pending = %s, created_at = %s, updated_at = %s, stop_reason = %s, header = %s, "
    "message_count = %s, transition_count = %s, lease_owner = %s, lease_until = %s, "
    "ready = %s WHERE run_id = %s"
)
_CLAIM = (
    "UPDATE loopstate_runs SET lease_owner = %s, lease_until = %s WHERE run_id IN ("
    "SELECT run_id FROM loopstate_runs WHERE ready AND lease_until <= %s "
    "ORDER BY updated_at LIMIT %s FOR UPDATE SKIP LOCKED) RETURNING run_id, updated_at"
)


class PostgresStore:
    """Runs in the PostgreSQL database at `dsn` (a `postgresql://` URL or `key=value` string).

    Tables are created, or migrated to this version's schema, on first use; a database
    migrated by a newer loopstate is refused. Errors name the database without its password.
    One connection per store object, used by one operation at a time.
    """

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.where = describe(dsn)
        self._conn: Connection | None = None
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"PostgresStore({self.where!r})"

    # -- the Store port ----------------------------------------------------------------------

    async def create(self, state: RunState, *, owner: str, now: float, ttl: float) -> None:
        async with self._transaction() as db:
            try:
                await db.execute(_INSERT, (*_columns(state, owner, now + ttl),))
            except errors.UniqueViolation:
                raise StoreError(f"run {state.run_id} already exists in {self.where}") from None
            await self._append(db, state, 0, 0, 0)

    async def save(self, state: RunState, *, owner: str, now: float, ttl: float) -> None:
        async with self._transaction() as db:
            row = await self._locked(db, state.run_id)
            holder, until, messages, transitions = row
            _check_lease(state.run_id, holder, until, owner=owner, now=now)
            if len(state.messages) < messages or len(state.transitions) < transitions:
                raise StoreError(
                    f"run {state.run_id}: refusing to rewrite stored history in {self.where} "
                    f"({len(state.messages)} messages and {len(state.transitions)} transitions "
                    f"given, {messages} and {transitions} stored)"
                )
            columns = _columns(state, owner, now + ttl)
            try:
                async with db.pipeline():  # the writes in one round trip, not one each
                    await db.execute(_UPDATE, (*columns[1:], state.run_id))
                    await self._append(db, state, messages, transitions)
            except errors.UniqueViolation:  # raised at the pipeline's end: two writers raced
                raise StoreError(
                    f"run {state.run_id}: refusing to rewrite stored history in {self.where}"
                ) from None

    async def renew(self, run_id: str, *, owner: str, now: float, ttl: float) -> None:
        await self._lease(run_id, owner=owner, now=now, ttl=ttl)

    async def load(self, run_id: str) -> RunState:
        async with self._transaction(snapshot=True) as db:
            return await read_run(db, run_id, self.where)

    async def acquire(self, run_id: str, *, owner: str, now: float, ttl: float) -> RunState:
        await self._lease(run_id, owner=owner, now=now, ttl=ttl)
        return await self.load(run_id)

    async def _lease(self, run_id: str, *, owner: str, now: float, ttl: float) -> None:
        """Take or extend `owner`'s lease without loading the run (`acquire`, `renew`)."""
        async with self._transaction() as db:
            holder, until, _, _ = await self._locked(db, run_id)
            _check_lease(run_id, holder, until, owner=owner, now=now)
            await db.execute(
                "UPDATE loopstate_runs SET lease_owner = %s, lease_until = %s WHERE run_id = %s",
                (owner, now + ttl, run_id),
            )

    async def release(self, run_id: str, *, owner: str) -> None:
        async with self._transaction() as db:
            await db.execute(
                "UPDATE loopstate_runs SET lease_owner = NULL, lease_until = 0 "
                "WHERE run_id = %s AND lease_owner = %s",
                (run_id, owner),
            )

    async def claim(self, *, owner: str, now: float, ttl: float, limit: int) -> list[str]:
        async with self._transaction() as db:
            claimed = await (await db.execute(_CLAIM, (owner, now + ttl, now, limit))).fetchall()
        return [run_id for run_id, _ in sorted(claimed, key=lambda row: row[1])]

    async def list_runs(
        self,
        *,
        status: str | None = None,
        limit: int = 100,
        by: Order = "updated",
        cursor: Cursor | None = None,
    ) -> list[RunSummary]:
        column = "updated_at" if by == "updated" else "created_at"
        where: list[str] = ["true"]
        params: list[Any] = []
        if status is not None:
            where.append("status = %s")
            params.append(status)
        if cursor is not None:
            where.append(f"({column}, run_id) < (%s, %s)")
            params.extend(cursor)
        async with self._transaction() as db:
            found = await (
                await db.execute(
                    f"SELECT {LISTED.format(p='loopstate_', h='header')} FROM loopstate_runs r "
                    f"WHERE {' AND '.join(where)} ORDER BY {column} DESC, run_id DESC LIMIT %s",
                    (*params, limit),
                )
            ).fetchall()
        return [listed(row, self.where) for row in found]

    async def events(self, *, after: int, limit: int = 1000) -> list[RunEvent]:
        async with self._transaction() as db:
            found = await (
                await db.execute(
                    "SELECT id, body FROM loopstate_events WHERE id > %s ORDER BY id LIMIT %s",
                    (after, limit),
                )
            ).fetchall()
        return [decode_event(row, self.where) for row in found]

    async def last_event_id(self) -> int:
        async with self._transaction() as db:
            row = await (await db.execute("SELECT max(id) FROM loopstate_events")).fetchone()
        return 0 if row is None or row[0] is None else int(row[0])

    async def reserve_key(
        self, key: str, fingerprint: str, *, now: float, stale_s: float
    ) -> KeptAnswer | None:
        async with self._transaction() as db:
            inserted = await (
                await db.execute(
                    "INSERT INTO loopstate_answers (key, fingerprint, at) VALUES (%s, %s, %s) "
                    "ON CONFLICT (key) DO NOTHING RETURNING key",
                    (key, fingerprint, now),
                )
            ).fetchone()
            if inserted is not None:
                return None
            row = await (
                await db.execute(
                    "SELECT fingerprint, status, body, at FROM loopstate_answers "
                    "WHERE key = %s FOR UPDATE",
                    (key,),
                )
            ).fetchone()
            if row is not None and (row[1] is not None or row[3] > now - stale_s):
                body = None if row[2] is None else json.loads(row[2])
                return KeptAnswer(fingerprint=row[0], status=row[1], body=body, at=row[3])
            await db.execute(
                "INSERT INTO loopstate_answers (key, fingerprint, at) VALUES (%s, %s, %s) "
                "ON CONFLICT (key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, "
                "status = NULL, body = NULL, at = EXCLUDED.at",
                (key, fingerprint, now),
            )
        return None

    async def keep_answer(self, key: str, status: int, body: dict[str, Any]) -> None:
        async with self._transaction() as db:
            await db.execute(
                "UPDATE loopstate_answers SET status = %s, body = %s WHERE key = %s",
                (status, json.dumps(body), key),
            )

    async def drop_key(self, key: str) -> None:
        async with self._transaction() as db:
            await db.execute("DELETE FROM loopstate_answers WHERE key = %s", (key,))

    async def ask_pause(self, run_id: str, *, by: str, now: float) -> None:
        async with self._transaction() as db:
            await db.execute(
                "INSERT INTO loopstate_answers (key, fingerprint, at) VALUES (%s, %s, %s) "
                "ON CONFLICT (key) DO NOTHING",
                (pause_key(run_id), by, now),
            )

    async def pause_asked(self, run_id: str) -> PauseRequest | None:
        async with self._transaction() as db:
            query = "SELECT fingerprint, at FROM loopstate_answers WHERE key = %s"
            row = await (await db.execute(query, (pause_key(run_id),))).fetchone()
        return None if row is None else PauseRequest(by=row[0], at=row[1])

    async def drop_pause(self, run_id: str) -> None:
        await self.drop_key(pause_key(run_id))

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    # -- plumbing ----------------------------------------------------------------------------

    @asynccontextmanager
    async def _transaction(self, *, snapshot: bool = False) -> AsyncIterator[Connection]:
        """One transaction on this store's connection, rolled back on any error; a database
        error becomes a `StoreError` naming the database. `snapshot`: every read sees the
        same committed state (a load never mixes two saves)."""
        async with self._lock:
            db = await self._connect()
            try:
                async with db.transaction():
                    if snapshot:
                        await db.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                    yield db
            except psycopg.Error as exc:
                if db.broken:
                    self._conn = None
                raise StoreError(f"{self.where}: {_first_line(exc)}") from None

    async def _connect(self) -> Connection:
        if self._conn is not None and not self._conn.closed:
            return self._conn
        try:
            db = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
        except psycopg.Error as exc:
            raise StoreError(
                f"cannot connect to {self.where}: {_first_line(exc)}: check the DSN and the server"
            ) from None
        try:
            await migrate(db, self.where)
        except BaseException:
            await db.close()
            raise
        self._conn = db
        return db

    async def _locked(self, db: Connection, run_id: str) -> tuple[Any, ...]:
        """The run's lease and counts, its row locked until the transaction ends."""
        row = await (
            await db.execute(
                "SELECT lease_owner, lease_until, message_count, transition_count "
                "FROM loopstate_runs WHERE run_id = %s FOR UPDATE",
                (run_id,),
            )
        ).fetchone()
        if row is None:
            raise RunNotFound(f"no run {run_id!r} in {self.where}")
        return row

    async def _append(
        self,
        db: Connection,
        state: RunState,
        first_message: int,
        first_transition: int,
        first_call: int | None = None,
    ) -> None:
        """Append the messages and transitions from the given indexes, upsert the calls from
        `first_call` (default: the current batch's; a new run's all, a fork's past included)."""
        run_id = state.run_id
        first_call = state.batch_start if first_call is None else first_call
        async with db.cursor() as cursor:
            try:
                await cursor.executemany(
                    "INSERT INTO loopstate_messages (run_id, idx, body) VALUES (%s, %s, %s)",
                    list(rows(run_id, first_message, state.messages[first_message:])),
                )
                await cursor.executemany(
                    "INSERT INTO loopstate_transitions (run_id, seq, body) VALUES (%s, %s, %s)",
                    list(transition_rows(state, first_transition)),
                )
            except errors.UniqueViolation:
                # Append-only: a row already there means two writers raced past the lease.
                raise StoreError(
                    f"run {run_id}: refusing to rewrite stored history in {self.where}"
                ) from None
            await cursor.executemany(
                "INSERT INTO loopstate_calls (run_id, position, body) VALUES (%s, %s, %s) "
                "ON CONFLICT (run_id, position) DO UPDATE SET body = EXCLUDED.body",
                list(rows(run_id, first_call, state.calls[first_call:])),
            )
            # Last, so the lock is held only from here to the commit (see the module's doc).
            await cursor.execute("SELECT pg_advisory_xact_lock(%s)", (EVENTS_LOCK,))
            await cursor.execute(
                "INSERT INTO loopstate_events (run_id, body) VALUES (%s, %s)", event_row(state)
            )


def describe(dsn: str) -> str:
    """The database `dsn` names, for messages: never its password."""
    try:
        parts = conninfo.conninfo_to_dict(dsn)
    except psycopg.Error:
        return "a PostgreSQL database (unparsable DSN)"
    host = parts.get("host") or "localhost"
    port = f":{parts['port']}" if parts.get("port") else ""
    user = f"{parts['user']}@" if parts.get("user") else ""
    options = f"?options={parts['options']}" if parts.get("options") else ""
    return f"postgresql://{user}{host}{port}/{parts.get('dbname') or ''}{options}"


def _check_lease(run_id: str, holder: str | None, until: float, *, owner: str, now: float) -> None:
    if lease_is_live(holder, until, owner=owner, now=now):
        raise RunBusy(f"run {run_id} is busy: {holder} holds it for {until - now:.1f} s more")


def _columns(state: RunState, owner: str, until: float) -> tuple[Any, ...]:
    counts = (len(state.messages), len(state.transitions))
    return (*summary_columns(state), header(state), *counts, owner, until, ready(state))


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
