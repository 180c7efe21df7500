"""Waiting for a signal another task or process gives: a file written, a row saved, a status.

`until(check)` returns `check()`'s first truthy value, looking again every `every` seconds.
`within` is a margin for a process that is stuck, never a time the test relies on: however
slowly a loaded machine runs, the test goes on as soon as the thing has happened, and fails
with the check's description only when it never does.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

MARGIN = 120.0
"""Seconds after which a wait fails: far beyond what any step of a test takes under load."""


async def until(
    check: Callable[[], T | Awaitable[T]], *, within: float = MARGIN, every: float = 0.01
) -> T:
    """`check()`'s first truthy value (awaited if it is a coroutine), from async code."""
    deadline = time.monotonic() + within
    while True:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within} s: {check.__doc__ or check}")
        await asyncio.sleep(every)


def blocked_until_exists(path: Path, *, within: float = MARGIN, every: float = 0.02) -> None:
    """Block (a tool's thread, in a worker) until `path` exists: the file a test writes to
    let the tool go on. Fails after `within`, as `until` does, rather than hold the tool."""
    deadline = time.monotonic() + within
    while not path.exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within} s: {path} was never written")
        time.sleep(every)
