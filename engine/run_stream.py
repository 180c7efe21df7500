"""`RunStream`: a run driven in a task while its events and deltas are iterated.

    stream = agent.stream("Summarise the report")
    async for event in stream:              # run events, with text and tool-call deltas
        if event.kind == "text_delta":
            print(event.text, end="")
    print(stream.result.status)             # the RunResult, once the iteration ends

The run goes on at its own pace (events queue up if the reader is slow). `aclose()`, or
leaving `async with agent.stream(...) as stream:` before the end, interrupts the run: its
model call is cut off (the upstream connection closed) and the run stays where it was last
saved, as after a crash (not aborted: `resume` continues it).
An error the run raises (a refused decision, a busy run) is raised by the iteration.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import suppress
from types import TracebackType
from typing import Generic, TypeVar

from loopstate.engine.events import Event
from loopstate.engine.hooks import Hooks
from loopstate.engine.streaming import TextDelta, ToolCallDelta

R = TypeVar("R")
StreamItem = Event | TextDelta | ToolCallDelta
_END = object()


class _Feed(Hooks):
    """The hooks that put a run's events and deltas into the stream's queue."""

    def __init__(self, queue: asyncio.Queue[object]) -> None:
        self.queue = queue

    async def on_event(self, event: Event) -> None:
        self.queue.put_nowait(event)

    async def on_text_delta(self, delta: TextDelta) -> None:
        self.queue.put_nowait(delta)

    async def on_tool_call_delta(self, delta: ToolCallDelta) -> None:
        self.queue.put_nowait(delta)


class RunStream(Generic[R]):
    """A run's events and deltas as an async iterator; `result` once it has ended."""

    def __init__(self, drive: Callable[[Hooks], Awaitable[R]]) -> None:
        self._drive = drive
        self._queue: asyncio.Queue[object] = asyncio.Queue()
        self._task: asyncio.Task[R] | None = None
        self._result: R | None = None

    @property
    def result(self) -> R:
        """The run's result; `RuntimeError` before the iteration has ended."""
        if self._result is None:
            raise RuntimeError("the stream has not ended: iterate it to the end first")
        return self._result

    def __aiter__(self) -> AsyncIterator[StreamItem]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[StreamItem]:
        if self._task is not None:
            raise RuntimeError("a run stream can be iterated once")
        task = self._task = asyncio.create_task(self._run())
        try:
            while (item := await self._queue.get()) is not _END:
                yield item  # type: ignore[misc]  # everything but _END is a StreamItem
            self._result = task.result()
        finally:
            await self.aclose()

    async def _run(self) -> R:
        try:
            return await self._drive(_Feed(self._queue))
        finally:
            self._queue.put_nowait(_END)

    async def aclose(self) -> None:
        """Interrupt the run if it is still going, and wait until it has let go of it."""
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task

    async def __aenter__(self) -> RunStream[R]:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
