"""`blocking`: the `_sync` forms of async methods, with a clear word when they cannot work, and
one line when they are interrupted.

An interrupted run (Ctrl-C, SIGTERM) stands where its last save left it, its lease released:
`blocking` then prints `interrupted; resume with: loopstate resume RUN` and raises
`RunInterrupted` (a `SystemExit`: the program stops without a traceback unless it catches it).
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from loopstate.engine.errors import RunInterrupted

T = TypeVar("T")


def blocking(coroutine: Coroutine[Any, Any, T], *, instead: str, run_id: str | None = None) -> T:
    """Run `coroutine` to the end on a new event loop. Inside a running loop (a notebook, an
    async function) that is impossible: raise `RuntimeError` naming what to await `instead`.
    Interrupted (SIGINT, SIGTERM) while it drives the run `run_id`: print one line saying how
    to resume it and raise `RunInterrupted`."""
    try:
        refuse_in_loop(instead)
    except RuntimeError:
        coroutine.close()  # never awaited: closed so Python does not warn about it
        raise
    try:
        return run_interruptible(coroutine)
    except KeyboardInterrupt as exc:
        if run_id is None:
            raise
        interrupted = RunInterrupted(run_id, _signal_of(exc))
        print(interrupted.line, file=sys.stderr, flush=True)
        raise interrupted from None


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived while `run_interruptible` ran: handled as Ctrl-C is."""


def run_interruptible(coroutine: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run`, with SIGTERM handled as SIGINT is: the main task is cancelled (its runs
    stop where they stand and release their leases), then `KeyboardInterrupt` is raised
    (`Terminated` for SIGTERM). As asyncio does for SIGINT, only a default SIGTERM is taken
    over (a program's own handler is left alone), and only in the main thread."""
    terminated = False

    async def main() -> T:
        nonlocal terminated
        task = asyncio.current_task()
        assert task is not None

        def on_term() -> None:
            nonlocal terminated
            terminated = True
            task.cancel()

        watch = threading.current_thread() is threading.main_thread() and (
            signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
        )
        if watch:
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, on_term)
        try:
            return await coroutine
        finally:
            if watch:
                asyncio.get_running_loop().remove_signal_handler(signal.SIGTERM)

    try:
        return asyncio.run(main())
    except asyncio.CancelledError:
        if terminated:
            raise Terminated() from None
        raise


def refuse_in_loop(instead: str) -> None:
    """Raise `RuntimeError` naming what to await `instead` inside a running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise RuntimeError(
        "cannot block inside a running event loop (a notebook or an async function): "
        f"use `await {instead}` there"
    )


def _signal_of(exc: KeyboardInterrupt) -> str:
    return "SIGTERM" if isinstance(exc, Terminated) else "SIGINT"
