"""The live side of the event streams: one poller per process notices runs that moved (in
this process, at once, through a hook; in another process sharing the store, within
`poll_s`) and tells the streams that follow them.

Nothing here is the record: a stream sends a run's transitions as the store holds them, each
with its `seq` as the SSE id, so a client that reconnects with `Last-Event-ID` is sent exactly
the transitions after it (from the store, whichever process serves it). A notice only says
"look again".
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from dataclasses import dataclass

from loopstate.engine.errors import LoopstateError
from loopstate.engine.logs import get_logger
from loopstate.engine.store import RunSummary, Store

WINDOW = 500
"""How many most recently updated runs the poller compares each round."""


@dataclass(frozen=True)
class Notice:
    """Run `summary.run_id` changed (state, status, pending calls or queued decisions)."""

    summary: RunSummary | None
    run_id: str


class Hub:
    def __init__(self, store: Store, moved: asyncio.Event, *, poll_s: float = 0.25) -> None:
        self.store = store
        self.moved = moved
        self.poll_s = poll_s
        self._runs: dict[str, set[asyncio.Queue[Notice]]] = defaultdict(set)
        self._all: set[asyncio.Queue[Notice]] = set()
        self._seen: dict[str, tuple[float, str, int]] | None = None
        self.log = get_logger().bind(component="service.feed")

    def subscribe(self, run_id: str | None) -> asyncio.Queue[Notice]:
        queue: asyncio.Queue[Notice] = asyncio.Queue(maxsize=256)
        (self._all if run_id is None else self._runs[run_id]).add(queue)
        return queue

    def unsubscribe(self, run_id: str | None, queue: asyncio.Queue[Notice]) -> None:
        if run_id is None:
            self._all.discard(queue)
            return
        followers = self._runs.get(run_id)
        if followers is not None:
            followers.discard(queue)
            if not followers:
                del self._runs[run_id]

    @property
    def clients(self) -> int:
        return len(self._all) + sum(len(q) for q in self._runs.values())

    def touch(self, run_id: str) -> None:
        """Run `run_id` changed in a way its summary may not show (a queued decision)."""
        self._publish(Notice(None, run_id))
        self.moved.set()

    async def serve(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wait(stop), self.poll_s)
            self.moved.clear()
            try:
                await self.poll()
            except LoopstateError as exc:  # the store is unreachable: streams just wait
                self.log.warning("feed_poll_failed", error=str(exc).splitlines()[0])

    async def _wait(self, stop: asyncio.Event) -> None:
        waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self.moved.wait())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()

    async def poll(self) -> None:
        summaries = await self.store.list_runs(limit=WINDOW)
        seen = {s.run_id: (s.updated_at, s.state, s.pending) for s in summaries}
        if self._seen is not None:
            for s in summaries:
                if self._seen.get(s.run_id) != seen[s.run_id]:
                    self._publish(Notice(s, s.run_id))
        self._seen = seen

    def _publish(self, notice: Notice) -> None:
        for queue in (*self._all, *self._runs.get(notice.run_id, ())):
            with contextlib.suppress(asyncio.QueueFull):  # a stalled client: it catches up
                queue.put_nowait(notice)  # from the store on its next notice or reconnect
