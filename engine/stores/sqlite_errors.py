"""`store_errors`: an `sqlite3` error escaping a store method becomes a one-line `StoreError`.

A damaged page, a row whose text is not UTF-8, or a lock another process holds past the busy
timeout would otherwise escape as a raw `sqlite3` traceback that names neither the file nor
the run. The message says which file, which run, and what to do.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from loopstate.engine.errors import RunDamaged, StoreError


class _SQLiteFile(Protocol):
    path: Path
    busy_timeout: float


S = TypeVar("S", bound=_SQLiteFile)
P = ParamSpec("P")
R = TypeVar("R")


def store_errors(
    method: Callable[Concatenate[S, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]:
    """Wrap an async store method; its first argument after `self` names the run (a run id
    or a `RunState`), if it has one."""

    @functools.wraps(method)
    async def wrapped(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await method(self, *args, **kwargs)
        except (sqlite3.Error, OSError) as exc:  # OSError: its folder cannot be made
            first = args[0] if args else None
            run_id = first if isinstance(first, str) else getattr(first, "run_id", None)
            run = f"run {run_id}: " if run_id is not None else ""
            damaged = run_id is not None and "decode" in str(exc)  # that run's text only
            kind = RunDamaged if damaged else StoreError
            raise kind(f"{self.path}: {run}{advice(exc, self.busy_timeout)}") from None

    return wrapped


def advice(exc: sqlite3.Error | OSError, busy_timeout: float) -> str:
    """What went wrong, on one line, and what to do about it."""
    message = (str(exc).splitlines() or [type(exc).__name__])[0]
    if isinstance(exc, OSError):
        return f"cannot open the store: {message}"
    if "locked" in message or "busy" in message:
        return (
            f"{message}: another process held the file for more than {busy_timeout:g} s; "
            "retry when it is done"
        )
    if "decode" in message:
        return f"{message}: the file holds text that is not UTF-8; restore it from a backup"
    if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
        return f"{message}: the file is damaged; restore it from a backup"
    return f"SQLite failed: {message}"
