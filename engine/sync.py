"""`blocking`: the `_sync` forms of async methods, with a clear word when they cannot work."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def blocking(coroutine: Coroutine[Any, Any, T], *, instead: str) -> T:
    """Run `coroutine` to the end on a new event loop. Inside a running loop (a notebook, an
    async function) that is impossible: raise `RuntimeError` naming what to await `instead`."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    coroutine.close()  # never awaited: closed so Python does not warn about it
    raise RuntimeError(
        f"cannot block inside a running event loop (a notebook or an async function): "
        f"use `await {instead}` there"
    )
