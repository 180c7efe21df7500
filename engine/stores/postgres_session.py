"""The PostgreSQL store's connections: opened with errors that name the database (never its
password), each marked by a session-level advisory lock (see `postgres_sql`), and the
LISTEN side of the wake-ups."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import conninfo

from loopstate.engine.errors import StoreError
from loopstate.engine.logs import get_logger
from loopstate.engine.stores.postgres_sql import SESSION_CLASS

Connection = psycopg.AsyncConnection[tuple[Any, ...]]


async def connect(dsn: str, where: str) -> Connection:
    """An autocommit connection whose statements are prepared on first use (one round trip
    more, once per statement and connection; every later use is one round trip)."""
    try:
        db = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    except psycopg.Error as exc:
        raise StoreError(
            f"cannot connect to {where}: {first_line(exc)}: check the DSN and the server"
        ) from None
    db.prepare_threshold = 0
    return db


async def take_session(db: Connection) -> int:
    """A session-level advisory lock no other open connection holds: its key marks this
    connection's leases, and it is released when the session ends, however it ends."""
    while True:
        key = secrets.randbelow(2**31 - 2) + 1
        query = "SELECT pg_try_advisory_lock(%s, %s)"
        row = await (await db.execute(query, (SESSION_CLASS, key))).fetchone()
        if row is not None and row[0]:
            return key


async def relay(db: Connection, wake: Callable[[], None], where: str) -> None:
    """Call `wake` for every notification `db` receives, until it is cancelled or lost."""
    try:
        async for _ in db.notifies():
            wake()
    except psycopg.Error as exc:
        get_logger().warning("store_listen_lost", store=where, error=first_line(exc))


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


def first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
