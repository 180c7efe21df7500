"""The store a command's `--db` names: a `postgresql://` URL, or else a SQLite file."""

from __future__ import annotations

import inspect
from typing import Any

from loopstate.engine.errors import DefinitionError
from loopstate.engine.store import Store
from loopstate.engine.stores.sqlite import DEFAULT_PATH, SQLiteStore

DB_HELP = "the store: a SQLite file or a postgresql:// URL (%(default)s)"
DEFAULT_DB = str(DEFAULT_PATH)


def open_store(db: str, *, busy_timeout: float | None = None) -> Store:
    """`PostgresStore` for a `postgresql://` or `postgres://` URL, else `SQLiteStore`
    (waiting up to `busy_timeout` seconds for another process holding the file)."""
    if db.startswith(("postgresql://", "postgres://")):
        try:
            from loopstate.engine.stores.postgres import PostgresStore
        except ImportError as exc:
            raise DefinitionError(str(exc)) from None
        return PostgresStore(db)
    if busy_timeout is None:
        return SQLiteStore(db)
    return SQLiteStore(db, busy_timeout=busy_timeout)


async def close_store(store: Any) -> None:
    """Close what `open_store` opened (a SQLite store closes at once, Postgres awaits)."""
    closed = store.close()
    if inspect.isawaitable(closed):
        await closed
