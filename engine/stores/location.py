"""Where the default store is: found the same way from any directory of a project.

In order: the `LOOPSTATE_DB` environment variable (a SQLite path or a `postgresql://` URL);
else the nearest directory, from the working directory up, that holds `.loopstate/` or marks
a project root (`pyproject.toml`, `.git`), with `.loopstate/runs.db` in it; else
`.loopstate/runs.db` under the working directory. Like git finding `.git`, so a run suspended
at a project's root is found again from `src/` or `tests/`.
"""

from __future__ import annotations

import os
from pathlib import Path

from loopstate.engine.errors import DefinitionError
from loopstate.engine.store import Store

ENV_VAR = "LOOPSTATE_DB"
STORE_DIR = ".loopstate"
DB_NAME = "runs.db"
_ROOT_MARKERS = (STORE_DIR, "pyproject.toml", ".git")


def is_url(db: str) -> bool:
    """Whether `db` names a PostgreSQL server rather than a SQLite file."""
    return db.startswith(("postgresql://", "postgres://"))


def default_db(start: Path | None = None) -> str:
    """`LOOPSTATE_DB` if set, else the SQLite file of the nearest project (see the module)."""
    named = os.environ.get(ENV_VAR, "").strip()
    if named:
        return named
    return str(project_dir(start) / STORE_DIR / DB_NAME)


def default_sqlite_path(start: Path | None = None) -> Path:
    """`default_db`, when it names a SQLite file; else the nearest project's file."""
    db = default_db(start)
    return project_dir(start) / STORE_DIR / DB_NAME if is_url(db) else Path(db)


def project_dir(start: Path | None = None) -> Path:
    """The nearest directory from `start` (the working directory) up that holds `.loopstate/`,
    `pyproject.toml` or `.git`; `start` itself when none does."""
    here = (start or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        if any((directory / marker).exists() for marker in _ROOT_MARKERS):
            return directory
    return here


def store_at(db: str, *, busy_timeout: float | None = None) -> Store:
    """`PostgresStore` for a `postgresql://` or `postgres://` URL, else `SQLiteStore`
    (waiting up to `busy_timeout` seconds for another process holding the file)."""
    if is_url(db):
        try:
            from loopstate.engine.stores.postgres import PostgresStore
        except ImportError as exc:
            raise DefinitionError(str(exc)) from None
        return PostgresStore(db)
    from loopstate.engine.stores.sqlite import SQLiteStore

    if busy_timeout is None:
        return SQLiteStore(db)
    return SQLiteStore(db, busy_timeout=busy_timeout)
