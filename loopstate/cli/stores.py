"""The store a command works on: `--db` (before or after the subcommand), else `LOOPSTATE_DB`,
else `.loopstate/runs.db` of the nearest project directory, found as git finds `.git`."""

from __future__ import annotations

import argparse
import asyncio
import inspect
from pathlib import Path
from typing import Any

from loopstate.engine.errors import LoopstateError
from loopstate.engine.store import Store
from loopstate.engine.stores.location import ENV_VAR, default_db, is_url, store_at

DB_HELP = (
    f"the store: a SQLite file or a postgresql:// URL (default: ${ENV_VAR}, else "
    ".loopstate/runs.db in the nearest directory up holding .loopstate/, pyproject.toml or .git)"
)


class NoStore(LoopstateError):
    """The command reads runs, and there is no store where it looked."""


def add_db_option(parser: argparse.ArgumentParser, *, help: str = DB_HELP) -> None:
    """`--db` on a subcommand; given before the subcommand (`loopstate --db X runs list`)
    it stays unless the subcommand's own `--db` is given too."""
    parser.add_argument("--db", default=argparse.SUPPRESS, metavar="DB", help=help)


def db_of(args: argparse.Namespace) -> str:
    """The store `args` name, or the default one."""
    db: str | None = getattr(args, "db", None)
    return db or default_db()


def open_store(db: str, *, busy_timeout: float | None = None, must_exist: bool = False) -> Store:
    """The store at `db`. With `must_exist`, a SQLite file that is not there is a `NoStore`
    error rather than a new empty file (reading commands never create a store)."""
    if must_exist and not is_url(db) and not Path(db).exists():
        raise NoStore(
            f"no store at {db} (nothing has run here yet); "
            f"pass --db PATH or set {ENV_VAR} to the store your runs are in"
        )
    return store_at(db, busy_timeout=busy_timeout)


async def close_store(store: Any) -> None:
    """Close what `open_store` opened (a SQLite store closes at once, Postgres awaits)."""
    closed = store.close()
    if inspect.isawaitable(closed):
        await closed


def check_usable(db: str) -> None:
    """Read the store at `db` once, through a store of its own closed at once (the command's
    store then opens in the event loop that serves): a store that cannot be used is a
    `StoreError` before a long-running command starts, not a server answering 500."""

    async def read() -> None:
        store = store_at(db)
        try:
            await store.list_runs(limit=1)
        finally:
            await close_store(store)

    asyncio.run(read())
