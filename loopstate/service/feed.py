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
from loopstate.engine.streaming import TextDelta, ToolCallDelta

WINDOW = 500
"""How many most recently updated runs the poller compares each round."""
BACKLOG = 10_000
"""Notices held for one client that does not read (beyond: dropped; it catches up from the
store on its next notice or reconnect)."""
DELTAS = 256
"""Deltas held for one client: beyond, its live text has gaps (deltas are never stored)."""


@dataclass(frozen=True)
class Notice:
    """Run `summary.run_id` changed (state, status, pending calls or queued decisions)."""

    summary: RunSummary | None
    run_id: str
    seq: int | None = None
    """Transition `seq` was just saved by this process (a stream sends up to it, so the
    deltas that follow come after it); None: look at everything stored."""


Item = Notice | TextDelta | ToolCallDelta
"""What a stream's queue receives: a notice to look again, or a live delta (runs of this
process only)."""


class Hub:
    def __init__(self, store: Store, moved: asyncio.Event, *, poll_s: float = 0.25) -> None:
        self.store = store
        self.moved = moved
        self.poll_s = poll_s
        self._runs: dict[str, set[asyncio.Queue[Item]]] = defaultdict(set)
        self._all: set[asyncio.Queue[Item]] = set()
        self._seen: dict[str, tuple[float, str, int]] | None = None
        self.log = get_logger().bind(component="service.feed")

    def subscribe(self, run_id: str | None) -> asyncio.Queue[Item]:
        queue: asyncio.Queue[Item] = asyncio.Queue()
        (self._all if run_id is None else self._runs[run_id]).add(queue)
        return queue

    def unsubscribe(self, run_id: str | None, queue: asyncio.Queue[Item]) -> None:
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

    def touch(self, run_id: str, seq: int | None = None) -> None:
        """Run `run_id` changed: in a way its summary may not show (a queued decision), or
        by transition `seq` of a run this process drives."""
        self._publish(Notice(None, run_id, seq))
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

    def delta(self, delta: TextDelta | ToolCallDelta) -> None:
        """A delta of a run this process drives, for the streams that follow that run."""
        for queue in self._runs.get(delta.run_id, ()):
            if queue.qsize() < DELTAS:
                queue.put_nowait(delta)

    def _publish(self, notice: Notice) -> None:
        for queue in (*self._all, *self._runs.get(notice.run_id, ())):
            if queue.qsize() < BACKLOG:
                queue.put_nowait(notice)
