"""The PostgreSQL store's tables and their versioned migrations.

`loopstate_schema` holds the version. A connection migrates the database up to `DB_VERSION`
under an advisory lock (several processes may start at once), in one transaction, and refuses
a database that a newer loopstate migrated further.
"""

from __future__ import annotations

from typing import Any

import psycopg

from loopstate.engine.errors import RunNotFound, StoreError
from loopstate.engine.state import RunState
from loopstate.engine.store import ready
from loopstate.engine.stores.codec import decode_run

DB_VERSION = 7
_LOCK = 7_204_611_093  # pg_advisory_xact_lock key: "loopstate migrates this database"

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (  # 1: runs, append-only messages and transitions, upserted calls
        """CREATE TABLE loopstate_runs (
            run_id text PRIMARY KEY,
            machine text NOT NULL,
            state text NOT NULL,
            status text NOT NULL,
            steps integer NOT NULL,
            pending integer NOT NULL,
            created_at double precision NOT NULL,
            updated_at double precision NOT NULL,
            stop_reason text,
            header text NOT NULL,
            message_count integer NOT NULL,
            transition_count integer NOT NULL,
            lease_owner text,
            lease_until double precision NOT NULL DEFAULT 0
        )""",
        "CREATE INDEX loopstate_runs_by_status ON loopstate_runs (status, updated_at)",
        """CREATE TABLE loopstate_messages (
            run_id text NOT NULL, idx integer NOT NULL, body text NOT NULL,
            PRIMARY KEY (run_id, idx)
        )""",
        """CREATE TABLE loopstate_transitions (
            run_id text NOT NULL, seq integer NOT NULL, body text NOT NULL,
            PRIMARY KEY (run_id, seq)
        )""",
        """CREATE TABLE loopstate_calls (
            run_id text NOT NULL, position integer NOT NULL, body text NOT NULL,
            PRIMARY KEY (run_id, position)
        )""",
    ),
    (  # 2: `ready` (see `store.ready`), kept at every save so `claim` is an index scan
        "ALTER TABLE loopstate_runs ADD COLUMN ready boolean NOT NULL DEFAULT false",
        "CREATE INDEX loopstate_runs_ready ON loopstate_runs (updated_at) WHERE ready",
    ),
    (  # 3: the store-wide event log, idempotency keys' answers, pages of runs by cursor
        # A sequence hands ids out in the order transactions ask, not the order they commit:
        # a writer takes `EVENTS_LOCK` before it draws its id and holds it until it commits
        # (see `PostgresStore`), so no reader ever sees id n + 1 while n may still commit.
        """CREATE TABLE loopstate_events (
            id bigserial PRIMARY KEY, run_id text NOT NULL, body text NOT NULL
        )""",
        """CREATE TABLE loopstate_answers (
            key text PRIMARY KEY, fingerprint text NOT NULL, status integer, body text,
            at double precision NOT NULL
        )""",
        "CREATE INDEX loopstate_runs_by_updated ON loopstate_runs (updated_at, run_id)",
        "CREATE INDEX loopstate_runs_by_created ON loopstate_runs (created_at, run_id)",
    ),
    (  # 4: the lease holder's session (takeover without waiting), where the pruned log ends
        "ALTER TABLE loopstate_runs ADD COLUMN lease_session bigint",
        "CREATE TABLE loopstate_pruned (upto bigint NOT NULL)",
        "INSERT INTO loopstate_pruned (upto) VALUES (0)",
    ),
    (  # 5: run definitions, each kept once by fingerprint (runs name theirs in the header)
        """CREATE TABLE IF NOT EXISTS loopstate_definitions (
            fingerprint text PRIMARY KEY, body text NOT NULL
        )""",
    ),
    (  # 6: what the decision checker accepts for a waiting run's calls (a decision recorded
        # in one statement: `engine/decision_guard`); the stream clients' cursors of every
        # service process (pruning keeps what any of them still needs)
        "ALTER TABLE loopstate_runs ADD COLUMN IF NOT EXISTS decidable jsonb",
        """CREATE TABLE IF NOT EXISTS loopstate_cursors (
            process text PRIMARY KEY, after bigint NOT NULL, until double precision NOT NULL
        )""",
    ),
    (  # 7: each run's write count (`RunState.revision`): a save from an older copy is refused
        "ALTER TABLE loopstate_runs ADD COLUMN IF NOT EXISTS revision bigint NOT NULL DEFAULT 0",
    ),
)
EVENTS_LOCK = 7_204_611_094
"""pg_advisory_xact_lock key: "a transaction is appending to the event log" (see migration 3)."""


async def migrate(db: psycopg.AsyncConnection[Any], where: str, *, upto: int = DB_VERSION) -> None:
    """Bring the database `db` is connected to up to schema `upto` (tests stop earlier)."""
    if await _version(db) == upto:
        return
    async with db.transaction():
        await db.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
        await db.execute("CREATE TABLE IF NOT EXISTS loopstate_schema (version integer NOT NULL)")
        version = await _version(db)
        _check(version, where)
        for statement in (s for step in MIGRATIONS[version:upto] for s in step):
            await db.execute(statement)
        if version < 2 <= upto:
            await _mark_ready(db, where)
        await db.execute("DELETE FROM loopstate_schema")
        await db.execute("INSERT INTO loopstate_schema (version) VALUES (%s)", (upto,))


async def _version(db: psycopg.AsyncConnection[Any]) -> int:
    found = await (await db.execute("SELECT to_regclass('loopstate_schema')")).fetchone()
    if found is None or found[0] is None:
        return 0
    row = await (await db.execute("SELECT max(version) FROM loopstate_schema")).fetchone()
    version = 0 if row is None or row[0] is None else int(row[0])
    return version


def _check(version: int, where: str) -> None:
    if version > DB_VERSION:
        raise StoreError(
            f"{where} has store schema {version}; this loopstate reads up to {DB_VERSION}: "
            "upgrade loopstate"
        )


async def read_run(db: psycopg.AsyncConnection[Any], run_id: str, where: str) -> RunState:
    """The run from its rows (`RunNotFound`, or `StoreError` if corrupt)."""
    found = await (
        await db.execute("SELECT header FROM loopstate_runs WHERE run_id = %s", (run_id,))
    ).fetchone()
    if found is None:
        raise RunNotFound(f"no run {run_id!r} in {where}")
    tables = [
        await (await db.execute(sql, (run_id,))).fetchall()
        for sql in (
            "SELECT idx, body FROM loopstate_messages WHERE run_id = %s ORDER BY idx",
            "SELECT seq, body FROM loopstate_transitions WHERE run_id = %s ORDER BY seq",
            "SELECT position, body FROM loopstate_calls WHERE run_id = %s ORDER BY position",
        )
    ]
    return decode_run(run_id, where, found[0], *tables)


async def _mark_ready(db: psycopg.AsyncConnection[Any], where: str) -> None:
    """Fill `ready` for runs stored before it existed (a corrupt run stays not ready)."""
    waiting = await (
        await db.execute(
            "SELECT run_id FROM loopstate_runs WHERE status IN ('running', 'awaiting_approval')"
        )
    ).fetchall()
    for (run_id,) in waiting:
        try:
            is_ready = ready(await read_run(db, run_id, where))
        except StoreError:
            continue
        await db.execute(
            "UPDATE loopstate_runs SET ready = %s WHERE run_id = %s", (is_ready, run_id)
        )
